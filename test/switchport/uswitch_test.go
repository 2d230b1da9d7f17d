package switchport_test

import (
	"encoding/binary"
	"testing"

	"github.com/smartt-transport/smartt/test/switchport"
	"github.com/smartt-transport/smartt/test/uswitch"
)

// The testbed's userspace switch takes this package's Port through uswitch.Model (the
// glue its documentation shows): frames come out in order, trimmed and marked as the
// port decided, after serialisation plus the propagation delay.
func TestPlugsIntoUswitch(t *testing.T) {
	frame := func() *uswitch.Frame {
		fr := make([]byte, 14+20+8+64+4000)
		binary.BigEndian.PutUint16(fr[12:], 0x0800)
		ip := fr[14:34]
		ip[0], ip[1], ip[8], ip[9] = 0x45, 2, 64, 17 // ECT(0), UDP
		binary.BigEndian.PutUint16(ip[2:], uint16(len(fr)-14))
		copy(ip[12:], []byte{10, 3, 0, 1, 10, 3, 0, 2})
		binary.BigEndian.PutUint16(fr[38:], uint16(len(fr)-34))
		fr[42] = 0x11 // version 1 DATA
		return uswitch.NewTestFrame(fr, 34, 6)
	}
	size := len(frame().Data()) + uswitch.WireOverhead
	p, err := switchport.New[*uswitch.Frame](switchport.Config{Rate: 1e9, DataBytes: 3 * size, Trim: true,
		KminBytes: size, KmaxBytes: 2 * size}, 1)
	if err != nil {
		t.Fatal(err)
	}
	m := uswitch.Model{
		Arrive: func(now int64, f *uswitch.Frame, size int, data, ect bool) uswitch.Verdict {
			return uswitch.Verdict(p.Arrive(now, f, size, data, ect))
		},
		Advance:   p.Advance,
		NextStart: p.NextStart,
		Pop: func() (uswitch.Departure, bool) {
			d, ok := p.Pop()
			return uswitch.Departure{Frame: d.Item, End: d.End, Trimmed: d.Trimmed, Marked: d.Marked}, ok
		},
	}
	const delay = 1000
	q := uswitch.NewModelQueue(m, delay, 46)
	var in []*uswitch.Frame
	for range 5 {
		f := frame()
		in = append(in, f)
		if !q.Enqueue(f, 0) {
			t.Fatal("frame dropped")
		}
	}
	if n := q.Next(); n != int64(size)*8+delay {
		t.Fatalf("first departure at %d, want %d", n, int64(size)*8+delay)
	}
	var out []*uswitch.Frame
	for now := int64(0); len(out) < 5 && now >= 0; {
		if f := q.Dequeue(now); f != nil {
			out = append(out, f)
			continue
		}
		now = q.Next()
	}
	if len(out) != 5 {
		t.Fatalf("%d of 5 frames left", len(out))
	}
	// Frame 0 is served at once, 1..3 fill the queue of 3, 4 is trimmed and, on the
	// control queue, overtakes the queued data.
	order := []int{0, 4, 1, 2, 3}
	for i, f := range out {
		if f != in[order[i]] {
			t.Fatalf("departure %d is not frame %d", i, order[i])
		}
		if trimmed := len(f.Data()) == 14+20+8+64; trimmed != (order[i] == 4) {
			t.Fatalf("frame %d trimmed = %v", order[i], trimmed)
		}
	}
	// Frame 1 leaves 2 frames behind (= kmax): marked.
	if out[2].Data()[15]&3 != 3 {
		t.Fatal("frame 1 not CE-marked")
	}
}
