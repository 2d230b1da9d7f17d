package switchport_test

import (
	"encoding/binary"
	"testing"

	"github.com/smartt-transport/smartt/test/netbed"
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
	const delay = 1000
	q := netbed.ModelQueue(p, delay, 46)
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

// The userspace switch does return-to-sender trimming with this package's port: a frame
// the port returns comes out of the queue's TakeReturned (not its departures) as its
// 64-byte header addressed back to the sender (Ethernet, IPv4 and UDP source and
// destination swapped) with FlagTrimmed|FlagReturned, the trim DSCP and valid checksums;
// it is control traffic from then on, so a full port queues it rather than returning it
// again.
func TestUswitchReturnToSender(t *testing.T) {
	frame := func(i int) *uswitch.Frame {
		fr := make([]byte, 14+20+8+64+4000)
		copy(fr[0:12], []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1}) // dst MAC, src MAC
		binary.BigEndian.PutUint16(fr[12:], 0x0800)
		ip := fr[14:34]
		ip[0], ip[1], ip[8], ip[9] = 0x45, 2, 64, 17 // ECT(0), UDP
		binary.BigEndian.PutUint16(ip[2:], uint16(len(fr)-14))
		copy(ip[12:], []byte{10, 3, 0, 1, 10, 3, 0, 2})
		binary.BigEndian.PutUint16(fr[34:], 50000) // source port (the sender's EV port)
		binary.BigEndian.PutUint16(fr[36:], 23600) // destination port
		binary.BigEndian.PutUint16(fr[38:], uint16(len(fr)-34))
		fr[42] = 0x11                                     // version 1 DATA
		binary.BigEndian.PutUint32(fr[42+24:], uint32(i)) // PSN
		return uswitch.NewTestFrame(fr, 34, 6)
	}
	size := len(frame(0).Data()) + uswitch.WireOverhead
	p, err := switchport.New[*uswitch.Frame](switchport.Config{Rate: 1e9, DataBytes: 3 * size, Trim: true,
		ReturnToSender: true, TrimBytes: 14 + 20 + 8 + 64 + uswitch.WireOverhead}, 1)
	if err != nil {
		t.Fatal(err)
	}
	q := netbed.ModelQueue(p, 1000, 46)
	var in []*uswitch.Frame
	for i := range 5 {
		f := frame(i)
		in = append(in, f)
		if !q.Enqueue(f, 0) {
			t.Fatalf("frame %d dropped", i)
		}
	}
	r := q.TakeReturned()
	if r != in[4] || q.TakeReturned() != nil {
		t.Fatal("want frame 4 (beyond the queue of 3) returned, and only it")
	}
	d := r.Data()
	if len(d) != 14+20+8+64 {
		t.Fatalf("returned frame of %d bytes, want the 64-byte header", len(d))
	}
	if d[43]&0x18 != 0x18 || !r.Returned() || r.IsData() {
		t.Fatalf("flags %#x: want FlagTrimmed|FlagReturned, control traffic", d[43])
	}
	if string(d[0:6]) != string([]byte{2, 0, 0, 0, 0, 1}) || string(d[6:12]) != string([]byte{2, 0, 0, 0, 0, 2}) {
		t.Fatalf("MACs not swapped: %x -> %x", d[6:12], d[0:6])
	}
	if string(d[26:34]) != string([]byte{10, 3, 0, 2, 10, 3, 0, 1}) {
		t.Fatalf("addresses not swapped: %v", d[26:34])
	}
	if binary.BigEndian.Uint16(d[34:]) != 23600 || binary.BigEndian.Uint16(d[36:]) != 50000 {
		t.Fatalf("ports not swapped: %d -> %d", binary.BigEndian.Uint16(d[34:]), binary.BigEndian.Uint16(d[36:]))
	}
	if d[15]>>2 != 46 {
		t.Fatalf("tos %#x: want the trim DSCP", d[15])
	}
	sum := func(b []byte) uint32 {
		var s uint32
		for i := 0; i+1 < len(b); i += 2 {
			s += uint32(b[i])<<8 | uint32(b[i+1])
		}
		for s>>16 != 0 {
			s = s&0xffff + s>>16
		}
		return s
	}
	if sum(d[14:34]) != 0xffff {
		t.Fatal("IPv4 header checksum wrong")
	}
	pseudo := append(append([]byte(nil), d[26:34]...), 0, 17, byte((len(d)-34)>>8), byte(len(d)-34))
	if sum(append(pseudo, d[34:]...)) != 0xffff {
		t.Fatal("UDP checksum wrong")
	}
	// The full port takes the returned header as control traffic.
	if !q.Enqueue(r, 1) || q.TakeReturned() != nil {
		t.Fatal("a returned header was refused or returned again")
	}
	if st := p.Stats(); st.Returned != 1 || st.Trims != 1 {
		t.Fatalf("port stats %+v: want one trim, returned", st)
	}
}
