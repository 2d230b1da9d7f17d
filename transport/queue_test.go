package transport

import "testing"

// TestRingNextZero: next hands out a zero slot whatever the slot held before (pop and
// reset clear them, grow makes new ones), so a caller may fill only the fields it sets,
// as the engine does for events; and the ring stays FIFO across next, push and growth.
func TestRingNextZero(t *testing.T) {
	var r ring[Event]
	want := 0
	for round := range 200 {
		for i := range round%37 + 1 {
			var ev *Event
			if i%2 == 0 {
				ev = r.next()
				if ev.Kind != 0 || ev.Data != nil || ev.Err != nil || ev.MsgID != 0 || ev.Peer.IsValid() {
					t.Fatalf("round %d: next returned a used slot: %+v", round, *ev)
				}
				ev.MsgID, ev.Data, ev.Err = uint32(want+r.len()-1), []byte{1}, ErrClosed
			} else {
				r.push(Event{MsgID: uint32(want + r.len()), Data: []byte{2}, Err: ErrIdle})
			}
		}
		for range round % 29 {
			if r.len() == 0 {
				break
			}
			if ev := r.pop(); ev.MsgID != uint32(want) {
				t.Fatalf("round %d: popped message %d, want %d", round, ev.MsgID, want)
			}
			want++
		}
		if round%50 == 49 {
			r.reset()
			want = 0
		}
	}
}
