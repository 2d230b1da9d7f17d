package transport

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport/seal"
	"github.com/smartt-transport/smartt/transport/wire"
)

// holdRig is two endpoints driven by hand, with ack.complete_delay on at the receiver,
// for the held-ACK tests.
type holdRig struct {
	t     *testing.T
	a, b  *Endpoint
	aAddr netip.AddrPort
	bAddr netip.AddrPort
	buf   []byte
	pkt   wire.Packet
}

const testHold = 50_000 // ns

func newHoldRig(t *testing.T, hold config.Duration) *holdRig {
	cfg := DefaultConfig()
	cfg.Ack.CompleteDelay = hold
	p := newPair(t, cfg, 0) // its endpoints, driven by hand
	return &holdRig{t: t, a: p.a, b: p.b, aAddr: p.aAddr, bAddr: p.bAddr, buf: p.buf}
}

// sent is a packet an endpoint produced, with its decoded type. The two packets of a
// bundle (an ACK with a DATA packet behind it in one datagram) are two sents.
type sent struct {
	data    []byte // the datagram; nil for the DATA of a bundle (it is in the ACK's)
	typ     wire.Type
	ev      uint16 // the Transmit's
	ack     wire.Ack
	bundled bool // one of a bundle's two packets
}

// poll drains e's transmit queue at now: what one flush of the daemon sends in a batch.
func (r *holdRig) poll(e *Endpoint, now int64) []sent {
	var out []sent
	for {
		t, ok := e.PollTransmit(now, r.buf)
		if !ok {
			return out
		}
		d := append([]byte(nil), r.buf[:t.N]...)
		d = append(d, t.Payload...)
		lead, rest := wire.BundleSplit(d)
		if err := r.pkt.Decode(lead); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, sent{data: d, typ: r.pkt.Type, ev: t.EV, ack: r.pkt.Ack, bundled: rest != nil})
		if rest != nil {
			if err := r.pkt.Decode(rest); err != nil || r.pkt.Type != wire.TypeData || t.Control || t.ECN != ECT0 {
				r.t.Fatalf("bundle behind an ACK: %v, %v (want DATA), control %v, ECN %d", err, r.pkt.Type, t.Control, t.ECN)
			}
			out = append(out, sent{typ: r.pkt.Type, ev: t.EV, bundled: true})
		}
	}
}

// deliver hands ds to e at now, from the other endpoint.
func (r *holdRig) deliver(e *Endpoint, now int64, ds []sent) {
	from := r.aAddr
	if e == r.a {
		from = r.bAddr
	}
	for _, d := range ds {
		if d.data != nil {
			e.HandlePacket(now, d.data, RxMeta{From: from})
		}
	}
}

// timers runs e's timers due at now.
func (r *holdRig) timers(e *Endpoint, now int64) {
	if d, ok := e.NextTimeout(); ok && d <= now {
		e.HandleTimeout(now)
	}
}

func types(ds []sent) []wire.Type {
	var ts []wire.Type
	for _, d := range ds {
		ts = append(ts, d.typ)
	}
	return ts
}

// events drains e's events of kind k.
func eventsOf(e *Endpoint, k EventKind) []Event {
	var out []Event
	for ev := range pending(e) {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

// request sends msg from a to b at 0 and delivers it at 10 us; it returns a's connection.
func (r *holdRig) request(msg []byte) ConnID {
	id, err := r.a.Dial(0, r.bAddr)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.a.Send(0, id, msg); err != nil {
		r.t.Fatal(err)
	}
	r.deliver(r.b, 10_000, r.poll(r.a, 0))
	return id
}

// TestHeldAckLeavesAtDeadline: the ACK of a completed one-packet message waits exactly
// complete_delay when no answer comes, carries the wait as HoldTime, and the sender's RTT
// sample leaves it out.
func TestHeldAckLeavesAtDeadline(t *testing.T) {
	r := newHoldRig(t, testHold)
	id := r.request(make([]byte, 64))
	if got := eventsOf(r.b, MessageReceived); len(got) != 1 {
		t.Fatalf("%d messages delivered, want 1 (the hold must not delay delivery)", len(got))
	}
	if ds := r.poll(r.b, 10_000); len(ds) != 0 {
		t.Fatalf("receiver sent %v at once, want nothing (ACK held)", types(ds))
	}
	if d, ok := r.b.NextTimeout(); !ok || d != 10_000+testHold {
		t.Fatalf("NextTimeout = %d, %v; want %d (the hold's deadline)", d, ok, 10_000+testHold)
	}
	r.timers(r.b, 10_000+testHold-1)
	if ds := r.poll(r.b, 10_000+testHold-1); len(ds) != 0 {
		t.Fatalf("ACK left before the deadline: %v", types(ds))
	}
	at := int64(10_000 + testHold)
	r.timers(r.b, at)
	ds := r.poll(r.b, at)
	if len(ds) != 1 || ds[0].typ != wire.TypeAck {
		t.Fatalf("at the deadline the receiver sent %v, want one ACK", types(ds))
	}
	if ds[0].ack.HoldTime != testHold {
		t.Fatalf("HoldTime %d, want %d", ds[0].ack.HoldTime, testHold)
	}
	r.deliver(r.a, at+10_000, ds)
	if got := eventsOf(r.a, MessageSent); len(got) != 1 {
		t.Fatalf("%d messages sent, want 1", len(got))
	}
	if ci, _ := r.a.ConnInfo(id); ci.SRTT != 20_000 {
		t.Fatalf("sender's SRTT %d ns, want 20000 (the hold subtracted)", ci.SRTT)
	}
	if s := r.b.Stats(); s.AcksHeld != 1 || s.AcksRode != 0 || s.AcksSent != 1 {
		t.Fatalf("AcksHeld %d AcksRode %d AcksSent %d, want 1 0 1", s.AcksHeld, s.AcksRode, s.AcksSent)
	}
}

// TestHeldAckRidesWithAnswer: when the receiver sends data to the peer before the
// deadline (on a connection it dialled, as the daemon answers, or on the one the request
// came on), the held ACK goes in the same flush, first, on the data packet's EV, and the
// sender learns of its delivery with the answer. An answer of at most bundleMaxPayload
// bytes carries the ACK in its own datagram (a bundle); a larger one goes behind it.
func TestHeldAckRidesWithAnswer(t *testing.T) {
	for _, c := range []struct {
		dial   bool
		answer int
	}{{true, 64}, {false, 64}, {true, bundleMaxPayload}, {true, bundleMaxPayload + 1}, {false, 4000}} {
		dial, bundle := c.dial, c.answer <= bundleMaxPayload
		r := newHoldRig(t, testHold)
		id := r.request(make([]byte, 64))
		rx := eventsOf(r.b, MessageReceived)
		if len(rx) != 1 || len(r.poll(r.b, 10_000)) != 0 {
			t.Fatalf("dial %v: request not delivered or ACK not held", dial)
		}
		back := rx[0].Conn
		if dial {
			var err error
			if back, err = r.b.Dial(30_000, r.aAddr); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.b.Send(30_000, back, make([]byte, c.answer)); err != nil {
			t.Fatal(err)
		}
		ds := r.poll(r.b, 30_000)
		if len(ds) != 2 || ds[0].typ != wire.TypeAck || ds[1].typ != wire.TypeData {
			t.Fatalf("%+v: answer's flush %v, want [ACK DATA]", c, types(ds))
		}
		if ds[0].bundled != bundle || ds[1].bundled != bundle {
			t.Fatalf("%+v: bundled %v, %v; want %v", c, ds[0].bundled, ds[1].bundled, bundle)
		}
		if ds[0].ev != ds[1].ev {
			t.Fatalf("dial %v: ACK on EV %d, data on %d: want one EV (one socket, one system call)", dial, ds[0].ev, ds[1].ev)
		}
		if ds[0].ack.HoldTime != 20_000 {
			t.Fatalf("dial %v: HoldTime %d, want 20000", dial, ds[0].ack.HoldTime)
		}
		r.deliver(r.a, 40_000, ds)
		var sentEv, got []Event
		for ev := range pending(r.a) {
			switch ev.Kind {
			case MessageSent:
				sentEv = append(sentEv, ev)
			case MessageReceived:
				got = append(got, ev)
			}
		}
		if len(sentEv) != 1 {
			t.Fatalf("dial %v: the request's Sent did not come with the answer", dial)
		}
		if len(got) != 1 || len(got[0].Data) != c.answer {
			t.Fatalf("%+v: the answer was not delivered whole: %d messages", c, len(got))
		}
		if want := map[bool]uint64{true: 1}[bundle]; r.b.Stats().BundlesSent != want || r.a.Stats().BundlesRecv != want {
			t.Fatalf("%+v: BundlesSent %d BundlesRecv %d, want %d", c, r.b.Stats().BundlesSent, r.a.Stats().BundlesRecv, want)
		}
		if ci, _ := r.a.ConnInfo(id); ci.SRTT != 20_000 {
			t.Fatalf("dial %v: sender's SRTT %d ns, want 20000", dial, ci.SRTT)
		}
		if s := r.b.Stats(); s.AcksHeld != 1 || s.AcksRode != 1 || s.AcksSent != 1 {
			t.Fatalf("dial %v: AcksHeld %d AcksRode %d AcksSent %d, want 1 1 1", dial, s.AcksHeld, s.AcksRode, s.AcksSent)
		}
		// Nothing is left to fire at the old deadline.
		r.timers(r.b, 10_000+testHold)
		if ds := r.poll(r.b, 10_000+testHold); len(ds) != 0 {
			t.Fatalf("dial %v: %v sent at the old deadline", dial, types(ds))
		}
	}
}

// TestHeldAckOtherPeer: data to another peer does not release the hold.
func TestHeldAckOtherPeer(t *testing.T) {
	r := newHoldRig(t, testHold)
	r.request(make([]byte, 64))
	other, err := r.b.Dial(20_000, netip.MustParseAddrPort("10.0.0.3:23600"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.b.Send(20_000, other, make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	if ds := r.poll(r.b, 20_000); len(ds) != 1 || ds[0].typ != wire.TypeData {
		t.Fatalf("flush %v, want the other peer's DATA alone", types(ds))
	}
	if s := r.b.Stats(); s.AcksSent != 0 {
		t.Fatal("hold released by data to another peer")
	}
}

// TestBulkCompletionNotHeld: a message of several packets is ACKed at completion at once
// (holding it would add the hold to its sender's completion time), and so is everything
// with complete_delay off.
func TestBulkCompletionNotHeld(t *testing.T) {
	for _, c := range []struct {
		hold config.Duration
		size int
	}{{testHold, 3 * 4096}, {testHold, 4097}, {0, 64}} {
		r := newHoldRig(t, c.hold)
		r.request(make([]byte, c.size))
		if len(eventsOf(r.b, MessageReceived)) != 1 {
			t.Fatalf("%+v: not delivered", c)
		}
		ds := r.poll(r.b, 10_000)
		if len(ds) == 0 || ds[len(ds)-1].typ != wire.TypeAck {
			t.Fatalf("%+v: receiver sent %v at completion, want its ACK at once", c, types(ds))
		}
		if s := r.b.Stats(); s.AcksHeld != 0 {
			t.Fatalf("%+v: AcksHeld %d, want 0", c, s.AcksHeld)
		}
	}
}

// TestHeldAckBackoff: after two holds in a row go unanswered, the connection's next
// holdBackoff completions are ACKed at once, then two are held again, and if they go
// unanswered too the next 2 x holdBackoff are ACKed at once; an answer resets it.
func TestHeldAckBackoff(t *testing.T) {
	r := newHoldRig(t, testHold)
	id, err := r.a.Dial(0, r.bAddr)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(0)
	var held []int
	one := func(i int, answer bool) {
		if _, err := r.a.Send(now, id, make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
		r.deliver(r.b, now+10_000, r.poll(r.a, now))
		now += 10_000
		ds := r.poll(r.b, now)
		if len(ds) == 0 {
			held = append(held, i)
			if answer {
				rx := eventsOf(r.b, MessageReceived)
				if _, err := r.b.Send(now+1000, rx[len(rx)-1].Conn, make([]byte, 64)); err != nil {
					t.Fatal(err)
				}
				now += 1000
			} else {
				now += testHold
				r.timers(r.b, now)
			}
			ds = r.poll(r.b, now)
		}
		r.deliver(r.a, now+10_000, ds)
		now += 10_000
		eventsOf(r.a, MessageReceived)
	}
	n := 2 + holdBackoff + 2 + 2*holdBackoff + 1
	for i := range n {
		one(i, false)
	}
	want := []int{0, 1, 2 + holdBackoff, 3 + holdBackoff, n - 1}
	if !slices.Equal(held, want) {
		t.Fatalf("held %v, want %v", held, want)
	}
	// An answer ends the backoff: the next unanswered pair backs off holdBackoff again.
	one(n, true) // held at n-1 was unanswered: this one is the first of a new pair
	held = held[:0]
	for i := range holdBackoff + 4 {
		one(i, false)
	}
	if want := []int{0, 1, 2 + holdBackoff, 3 + holdBackoff}; !slices.Equal(held, want) {
		t.Fatalf("after an answer held %v, want %v", held, want)
	}
}

// TestCompleteDelayClamped: the engine holds at most half its RTO floor (min_rto, or
// fixed_rto when set), whatever ack.complete_delay says, so a held ACK cannot time out
// its packet; a config that lowers min_rto stays valid.
func TestCompleteDelayClamped(t *testing.T) {
	for _, c := range []struct {
		minRTO, fixedRTO, hold, want config.Duration
	}{{200_000, 0, 1_000_000, 100_000}, {200_000, 0, 100_000, 100_000}, {200_000, 0, 99_999, 99_999},
		{5_000_000, 0, 500_000, 500_000}, {5_000_000, 300_000, 500_000, 150_000}, {200_000, 0, 0, 0}} {
		cfg := DefaultConfig()
		cfg.MinRTO, cfg.FixedRTO, cfg.Ack.CompleteDelay = c.minRTO, c.fixedRTO, c.hold
		cfg.InitialRTO = max(cfg.InitialRTO, c.minRTO)
		cfg.MaxRTO = max(cfg.MaxRTO, c.minRTO)
		e, err := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if got := e.Config().Ack.CompleteDelay; got != c.want {
			t.Errorf("%+v: engine holds %v, want %v", c, got, c.want)
		}
	}
	cfg := DefaultConfig()
	cfg.Ack.CompleteDelay = -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "ack.complete_delay") {
		t.Fatalf("complete_delay -1: %v", err)
	}
}

// TestHeldAckAllocatesNothing: a request and reply exchange with held ACKs riding on the
// answers (the engine's side of the daemons' round trip) allocates nothing in steady state.
func TestHeldAckAllocatesNothing(t *testing.T) {
	pool := &recycler{}
	cfg := DefaultConfig()
	cfg.Ack.CompleteDelay = testHold
	a, _ := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2)), Hooks{Buffers: pool})
	b, _ := NewEndpoint(cfg, rand.New(rand.NewPCG(3, 4)), Hooks{Buffers: pool})
	aAddr, bAddr := netip.MustParseAddrPort("10.0.0.1:23600"), netip.MustParseAddrPort("10.0.0.2:23600")
	ab, err := a.Dial(0, bAddr)
	if err != nil {
		t.Fatal(err)
	}
	ba, err := b.Dial(0, aAddr) // the daemon answers on a connection of its own
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 64)
	slots := make([][]byte, 8)
	for i := range slots {
		slots[i] = make([]byte, MaxDatagram(cfg))
	}
	now := int64(0)
	// move sends everything from's flush to to, and gives delivered buffers back.
	move := func(from, to *Endpoint, fromAddr netip.AddrPort) {
		n := 0
		for ; n < len(slots); n++ {
			tx, ok := from.PollTransmit(now, slots[n])
			if !ok {
				break
			}
			slots[n] = slots[n][:tx.N]
		}
		now += 5_000
		for i := range n {
			to.HandlePacket(now, slots[i], RxMeta{From: fromAddr})
			slots[i] = slots[i][:cap(slots[i])]
		}
		for ev := range pending(to) {
			if ev.Kind == MessageReceived {
				pool.Put(ev.Data)
			}
		}
	}
	trip := func() {
		if _, err := a.Send(now, ab, msg); err != nil {
			t.Fatal(err)
		}
		move(a, b, aAddr)
		if _, err := b.Send(now, ba, msg); err != nil {
			t.Fatal(err)
		}
		move(b, a, bAddr)
	}
	for range 1000 {
		trip()
	}
	s0 := b.Stats()
	if allocs := testing.AllocsPerRun(1000, trip); allocs > 0.01 {
		t.Errorf("%.3f allocations per round trip", allocs)
	}
	if s := b.Stats(); s.AcksRode-s0.AcksRode < 1000 || a.Stats().AcksRode < 1000 {
		t.Fatalf("ACKs rode: b %d, a %d; want every one", s.AcksRode-s0.AcksRode, a.Stats().AcksRode)
	}
}

// TestHeldAckOnClose: closing the connection a held ACK belongs to sends it at once.
func TestHeldAckOnClose(t *testing.T) {
	r := newHoldRig(t, testHold)
	r.request(make([]byte, 64))
	rx := eventsOf(r.b, MessageReceived)
	if len(rx) != 1 || len(r.poll(r.b, 10_000)) != 0 {
		t.Fatal("request not delivered or ACK not held")
	}
	if err := r.b.Close(20_000, rx[0].Conn); err != nil {
		t.Fatal(err)
	}
	if ds := r.poll(r.b, 20_000); len(ds) == 0 || ds[0].typ != wire.TypeAck || ds[0].ack.HoldTime != 10_000 {
		t.Fatalf("after Close the receiver sent %v, want the held ACK first (HoldTime 10000)", types(ds))
	}
}

// TestBundleHostile: the DATA packet behind a bundled ACK is handled like a datagram of
// its own, and a datagram that claims to be a bundle but carries anything else behind the
// ACK has its ACK processed and the rest counted as malformed (wire.ErrBundle), never
// delivered; a flagged ACK alone is an ACK; lengths that do not add up decode as one
// malformed packet. Nothing panics.
func TestBundleHostile(t *testing.T) {
	// answer returns a rig whose requester (a) has a held ACK's bundle from b to take in,
	// and that bundle.
	answer := func() (*holdRig, []byte) {
		r := newHoldRig(t, testHold)
		r.request(make([]byte, 64))
		rx := eventsOf(r.b, MessageReceived)
		if _, err := r.b.Send(30_000, rx[0].Conn, make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
		ds := r.poll(r.b, 30_000)
		if len(ds) != 2 || !ds[0].bundled {
			t.Fatalf("no bundle: %v", types(ds))
		}
		return r, ds[0].data
	}
	_, b := answer()
	lead, rest := wire.BundleSplit(b)
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	sealedData := cat(rest)
	sealedData[1] |= byte(wire.FlagSealed)
	badWords := cat(b)
	badWords[38] = 9
	for _, c := range []struct {
		name           string
		dgram          []byte
		sent, received int    // MessageSent and MessageReceived events at a
		malformed      uint64 // Stats.Malformed
		bundleErr      uint64 // of them, wire.ErrBundle
	}{
		{"honest", b, 1, 1, 0, 0},
		{"ack+ack", cat(lead, lead), 1, 0, 1, 1},
		{"ack+short", cat(lead, rest[:wire.DataHdrLen-1]), 1, 0, 1, 1},
		{"ack+sealed data", cat(lead, sealedData), 1, 0, 1, 1},
		{"ack+junk", cat(lead, []byte{0xff, 0xff, 0xff}), 1, 0, 1, 1},
		{"flagged ack alone", cat(lead), 1, 0, 0, 0},
		{"sack width out of range", badWords, 0, 0, 1, 0},
	} {
		r, _ := answer()
		r.a.HandlePacket(40_000, c.dgram, RxMeta{From: r.bAddr})
		var sentN, recvN int
		for ev := range pending(r.a) {
			switch ev.Kind {
			case MessageSent:
				sentN++
			case MessageReceived:
				recvN++
			}
		}
		s := r.a.Stats()
		if sentN != c.sent || recvN != c.received || s.Malformed != c.malformed || s.MalformedByKind[wire.ErrBundle.Code] != c.bundleErr {
			t.Errorf("%s: %d sent, %d received, %d malformed (%d bundle); want %d, %d, %d (%d)", c.name,
				sentN, recvN, s.Malformed, s.MalformedByKind[wire.ErrBundle.Code], c.sent, c.received, c.malformed, c.bundleErr)
		}
	}
}

// TestNoBundleWithAuth: with authentication on, a held ACK still rides ahead of the
// answer but in a datagram of its own (a seal covers one packet).
func TestNoBundleWithAuth(t *testing.T) {
	r := newHoldRig(t, testHold)
	cfg := authConfig(seal.Auth)
	cfg.Ack.CompleteDelay = testHold
	var err error
	if r.a, err = NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2))); err != nil {
		t.Fatal(err)
	}
	if r.b, err = NewEndpoint(cfg, rand.New(rand.NewPCG(3, 4))); err != nil {
		t.Fatal(err)
	}
	id, err := r.a.Dial(0, r.bAddr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.a.Send(0, id, make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	for tx, ok := r.a.PollTransmit(0, r.buf); ok; tx, ok = r.a.PollTransmit(0, r.buf) {
		r.b.HandlePacket(10_000, r.buf[:tx.N], RxMeta{From: r.aAddr})
	}
	rx := eventsOf(r.b, MessageReceived)
	if len(rx) != 1 {
		t.Fatal("request not delivered")
	}
	if _, err := r.b.Send(30_000, rx[0].Conn, make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	var first []byte
	n := 0
	for tx, ok := r.b.PollTransmit(30_000, r.buf); ok; tx, ok = r.b.PollTransmit(30_000, r.buf) {
		if n == 0 {
			first = append(first, r.buf[:tx.N]...)
		}
		n++
	}
	if n != 2 || wire.Type(first[0]&0x0f) != wire.TypeAck || wire.Flags(first[1])&wire.FlagBundle != 0 {
		t.Fatalf("with auth the answer's flush is %d datagrams, the first %#x %#x; want 2, an unbundled ACK first", n, first[0], first[1])
	}
	if s := r.b.Stats(); s.BundlesSent != 0 || s.AcksRode != 1 {
		t.Fatalf("BundlesSent %d AcksRode %d, want 0 1", s.BundlesSent, s.AcksRode)
	}
}
