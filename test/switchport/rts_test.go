package switchport

import "testing"

// TestReturnToSender: with ReturnToSender a data packet that finds the data queue full is
// handed back (Returned) instead of being queued trimmed on the control queue; nothing of
// it is served here, the counters count it as a trim and a return, and the packets that
// fit are served as before. Evicted heads come out of PopReturned, not PopEvicted.
func TestReturnToSender(t *testing.T) {
	p, err := New[int](Config{Rate: 8e9, DataBytes: 300, Trim: true, ReturnToSender: true}, 1)
	if err != nil {
		t.Fatal(err)
	}
	p.Arrive(0, 0, 100, true, false) // in service 0..100 ns
	for i := 1; i <= 3; i++ {
		if v := p.Arrive(0, i, 100, true, false); v != Queued {
			t.Fatalf("packet %d: %v, want queued", i, v)
		}
	}
	for i := 4; i < 14; i++ {
		if v := p.Arrive(1, i, 100, true, false); v != Returned {
			t.Fatalf("packet %d into a full queue: %v, want returned", i, v)
		}
	}
	// Control packets still queue (a returned header crossing this port is one).
	if v := p.Arrive(1, 100, 64, false, false); v != Queued {
		t.Fatalf("control packet: %v", v)
	}
	if p.ControlBytes() != 64 || p.DataBytes() != 300 {
		t.Fatalf("queues %d control, %d data bytes; want 64 and 300 (nothing trimmed onto the control queue)", p.ControlBytes(), p.DataBytes())
	}
	p.Advance(1_000)
	var order []int
	for {
		d, ok := p.Pop()
		if !ok {
			break
		}
		if d.Trimmed {
			t.Fatalf("packet %d served trimmed at this port", d.Item)
		}
		order = append(order, d.Item)
	}
	want := []int{0, 100, 1, 2, 3}
	if len(order) != len(want) {
		t.Fatalf("served %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("served %v, want %v", order, want)
		}
	}
	st := p.Stats()
	if st.Trims != 10 || st.Returned != 10 || st.Drops != 0 || st.Dequeued != 5 || st.Enqueued != 5 {
		t.Fatalf("stats %+v: want 10 trims, all returned, 5 packets through", st)
	}

	// With eviction the queued head is returned instead, handed out once by PopReturned.
	q, err := New[int](Config{Rate: 8e9, DataBytes: 300, Trim: true, ReturnToSender: true, Evict: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	q.Arrive(0, 0, 100, true, false)
	for i := 1; i <= 3; i++ {
		q.Arrive(0, i, 100, true, false)
	}
	if v := q.Arrive(1, 4, 100, true, false); v != Queued {
		t.Fatalf("evicting arrival: %v, want queued", v)
	}
	if x, ok := q.PopReturned(); !ok || x != 1 {
		t.Fatalf("PopReturned = %d, %v; want the head, 1", x, ok)
	}
	if _, ok := q.PopReturned(); ok {
		t.Fatal("the evicted head handed out twice")
	}
	if _, ok := q.PopEvicted(); ok {
		t.Fatal("a returned head also came out of PopEvicted")
	}
	if st := q.Stats(); st.Returned != 1 || st.Trims != 1 || st.Enqueued != st.Dequeued+uint64(q.Queued())+1 {
		t.Fatalf("stats %+v", st)
	}

	// Return to sender needs trimming.
	if _, err := New[int](Config{Rate: 8e9, DataBytes: 300, ReturnToSender: true}, 1); err == nil {
		t.Fatal("return_to_sender without trim accepted")
	}
}
