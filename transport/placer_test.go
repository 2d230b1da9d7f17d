package transport

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"
	"unsafe"

	"github.com/smartt-transport/smartt/transport/wire"
)

// fakePlacer hands out buffers of its own and records what the engine did with them.
type fakePlacer struct {
	decline  bool
	asked    int
	bufs     map[uint64][]byte
	unplaced []uint64
	heads    [][]byte
}

func (f *fakePlacer) Place(peer netip.AddrPort, n int, head []byte) ([]byte, uint64) {
	f.asked++
	f.heads = append(f.heads, append([]byte(nil), head[:8]...))
	if f.decline {
		return nil, 0
	}
	tok := uint64(len(f.bufs) + 1)
	f.bufs[tok] = make([]byte, n)
	return f.bufs[tok], tok
}

func (f *fakePlacer) Unplace(tok uint64) { f.unplaced = append(f.unplaced, tok) }

// placeRig is a sender a and a receiver b (chunked delivery, as the daemon's) whose
// receiver has a fakePlacer, and the datagrams in flight from a to b.
type placeRig struct {
	t     *testing.T
	a, b  *Endpoint
	p     *fakePlacer
	aAddr netip.AddrPort
	bAddr netip.AddrPort
	conn  ConnID
	now   int64
}

func newPlaceRig(t *testing.T, decline bool) *placeRig {
	r := &placeRig{t: t, p: &fakePlacer{decline: decline, bufs: map[uint64][]byte{}},
		aAddr: netip.MustParseAddrPort("10.0.0.1:23600"), bAddr: netip.MustParseAddrPort("10.0.0.2:23600")}
	cfg := DefaultConfig()
	a, err := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewEndpoint(cfg, rand.New(rand.NewPCG(3, 4)), Hooks{DeliverChunks: true, Placer: r.p})
	if err != nil {
		t.Fatal(err)
	}
	r.a, r.b = a, b
	if r.conn, err = a.Dial(0, r.bAddr); err != nil {
		t.Fatal(err)
	}
	return r
}

// flush takes everything a sends now; order picks the order b gets the data packets in.
func (r *placeRig) exchange(order func([][]byte) [][]byte) {
	buf := make([]byte, MaxDatagram(r.a.Config()))
	for range 100 {
		var ds [][]byte
		for tx, ok := r.a.PollTransmit(r.now, buf); ok; tx, ok = r.a.PollTransmit(r.now, buf) {
			ds = append(ds, append(append([]byte(nil), buf[:tx.N]...), tx.Payload...))
		}
		if order != nil {
			ds = order(ds)
		}
		r.now += 10_000
		for _, d := range ds {
			r.b.HandlePacket(r.now, d, RxMeta{From: r.aAddr})
		}
		var acks int
		for tx, ok := r.b.PollTransmit(r.now, buf); ok; tx, ok = r.b.PollTransmit(r.now, buf) {
			r.a.HandlePacket(r.now+10_000, buf[:tx.N], RxMeta{From: r.bAddr})
			acks++
		}
		r.now += 20_000
		if len(ds) == 0 && acks == 0 {
			if d, ok := r.a.NextTimeout(); ok && d > r.now+int64(r.a.Config().MinRTO) {
				return
			}
			r.a.HandleTimeout(r.now)
			r.b.HandleTimeout(r.now)
		}
	}
}

// TestPlacerReceivesInto: a large message from a peer that has proven its address is
// written straight into the Placer's buffer, also when its offset-0 packet comes after
// others (what arrived before is moved over), and delivered there (Event.Data is that
// buffer, Event.Placed its token, no chunks); the first message on a new connection,
// whose peer has not proven itself yet, and small ones are not offered; a Placer that
// declines leaves the message in the engine's chunks.
func TestPlacerReceivesInto(t *testing.T) {
	for _, c := range []struct {
		name    string
		decline bool
		order   func([][]byte) [][]byte
	}{
		{"in order", false, nil},
		{"offset 0 last", false, func(ds [][]byte) [][]byte {
			for i, d := range ds { // move the first data packet of the batch to the end
				if d[0] == wire.Version<<4|byte(wire.TypeData) {
					return append(append(ds[:i:i], ds[i+1:]...), d)
				}
			}
			return ds
		}},
		{"declined", true, nil},
	} {
		r := newPlaceRig(t, c.decline)
		// The first message proves nothing yet: it is not offered.
		first := message(3*PlaceMin, 1)
		if _, err := r.a.Send(r.now, r.conn, first); err != nil {
			t.Fatal(err)
		}
		r.exchange(nil)
		if got := eventsOf(r.b, MessageReceived); len(got) != 1 || got[0].Placed != 0 || r.p.asked != 0 {
			t.Fatalf("%s: first message: %d delivered, placed %v, Place asked %d times; want 1, no, 0", c.name, len(got), len(got) == 1 && got[0].Placed != 0, r.p.asked)
		}
		small := message(PlaceMin-1, 2)
		big := message(5*PlaceMin+123, 3)
		for _, m := range [][]byte{small, big} {
			if _, err := r.a.Send(r.now, r.conn, m); err != nil {
				t.Fatal(err)
			}
		}
		r.exchange(c.order)
		got := eventsOf(r.b, MessageReceived)
		if len(got) != 2 || r.p.asked != 1 {
			t.Fatalf("%s: %d delivered, Place asked %d times; want 2 and 1 (the large one)", c.name, len(got), r.p.asked)
		}
		ev := got[1]
		data := ev.Data
		if ev.Chunks != nil {
			data = bytes.Join(ev.Chunks, nil)
		}
		if !bytes.Equal(data, big) {
			t.Fatalf("%s: the large message differs", c.name)
		}
		if !bytes.Equal(r.p.heads[0], big[:8]) {
			t.Fatalf("%s: Place saw head %x, want the message's start %x", c.name, r.p.heads[0], big[:8])
		}
		placed := !c.decline
		if (ev.Placed != 0) != placed || (placed && (ev.Chunks != nil || &ev.Data[0] != &r.p.bufs[ev.Placed][0])) {
			t.Fatalf("%s: Placed %d, chunks %v; want it in the Placer's buffer: %v", c.name, ev.Placed, ev.Chunks != nil, placed)
		}
		if st := r.b.Stats(); st.MsgsPlaced != map[bool]uint64{true: 1}[placed] || len(r.p.unplaced) != 0 {
			t.Fatalf("%s: MsgsPlaced %d, unplaced %v", c.name, st.MsgsPlaced, r.p.unplaced)
		}
	}
}

// TestPlacerUnplacedOnAbort: a placed message that will never be delivered (its
// connection is aborted half-way) is given back with Unplace, once, and the engine's
// chunk pool never receives the Placer's memory.
func TestPlacerUnplacedOnAbort(t *testing.T) {
	r := newPlaceRig(t, false)
	if _, err := r.a.Send(r.now, r.conn, []byte("proves the connection")); err != nil {
		t.Fatal(err)
	}
	r.exchange(nil)
	eventsOf(r.b, MessageReceived)
	big := message(8*PlaceMin, 4)
	if _, err := r.a.Send(r.now, r.conn, big); err != nil {
		t.Fatal(err)
	}
	// Deliver only the first half of the packets.
	r.exchange(func(ds [][]byte) [][]byte { return ds[:len(ds)/2] })
	if r.p.asked != 1 || len(eventsOf(r.b, MessageReceived)) != 0 {
		t.Fatalf("Place asked %d times; want 1 and nothing delivered", r.p.asked)
	}
	var accepted ConnID
	for _, ci := range r.b.Conns(nil) {
		accepted = ci.ID
	}
	if err := r.b.Abort(r.now, accepted); err != nil {
		t.Fatal(err)
	}
	if len(r.p.unplaced) != 1 || r.p.unplaced[0] != 1 {
		t.Fatalf("unplaced %v, want [1]", r.p.unplaced)
	}
	// Nothing of the Placer's buffer went into the chunk pool: fresh chunks are not it.
	buf := r.p.bufs[1]
	lo := uintptr(unsafe.Pointer(&buf[0]))
	for range 64 {
		ch := r.b.getChunk(RecvChunk)
		if p := uintptr(unsafe.Pointer(&ch[0])); p >= lo && p < lo+uintptr(len(buf)) {
			t.Fatal("the engine reused the Placer's memory as a chunk")
		}
	}
}
