package transport

import (
	"net/netip"
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

// Tests at and beyond the bounds of docs/security.md's table whose rows named none.

// TestRecvWindowAtAndBeyond: besides the head of delivery order, a connection's open
// messages may claim exactly recv_window bytes of stream; a message that would claim one
// byte more is dropped unacknowledged (BeyondWindow), whether it ends beyond the window or
// overlaps the claims already open.
func TestRecvWindowAtAndBeyond(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RecvWindow = 1 << 20
	e := newEndpoint(t, cfg)
	from := netip.MustParseAddrPort("10.6.6.7:23600")
	open := func() int {
		n := 0
		for _, c := range e.list {
			n += c.rx.len()
		}
		return n
	}
	const head = 10
	e.HandlePacket(1, firstContact(t, 9, 0, head, 0), RxMeta{From: from}) // the head: exempt
	start := streamLen(head)
	w := uint64(cfg.RecvWindow)
	fill := uint32(w - start - MsgOverhead) // ends exactly at the window's end
	beyond := e.Stats().BeyondWindow
	e.HandlePacket(2, firstContact(t, 9, 1, fill+1, start), RxMeta{From: from})
	if got := e.Stats().BeyondWindow - beyond; got != 1 || open() != 1 {
		t.Fatalf("a message one byte beyond the window: BeyondWindow +%d, %d open (want +1, 1)", got, open())
	}
	e.HandlePacket(3, firstContact(t, 9, 1, fill, start), RxMeta{From: from})
	if got := e.Stats().BeyondWindow - beyond; got != 1 || open() != 2 {
		t.Fatalf("a message ending at the window: BeyondWindow +%d, %d open (want +1, 2)", got-1, open())
	}
	// Beside it, overlapping claims add up to the window and no more: the open messages
	// but the head claim W - start, so one more claiming start bytes is at the bound.
	e.HandlePacket(4, firstContact(t, 9, 2, head+1, start), RxMeta{From: from})
	if got := e.Stats().BeyondWindow - beyond; got != 2 || open() != 2 {
		t.Fatalf("claims one byte beyond the window in total: BeyondWindow +%d, %d open (want +2, 2)", got, open())
	}
	e.HandlePacket(5, firstContact(t, 9, 2, head, start), RxMeta{From: from})
	e.HandlePacket(6, firstContact(t, 9, 3, 1, start), RxMeta{From: from})
	if got := e.Stats().BeyondWindow - beyond; got != 3 || open() != 3 {
		t.Fatalf("claims at the window in total, then one more: BeyondWindow +%d, %d open (want +3, 3)", got, open())
	}
	for _, c := range e.list {
		if c.claimed != w+start {
			t.Fatalf("the connection claims %d bytes, want the window %d and the head's %d", c.claimed, w, start)
		}
	}
}

// TestUnprovenTimeoutAtAndBeyond: a connection whose peer never proves its address keeps
// what it holds until unproven_timeout and not after: just before it the connection
// and its buffer are there, by unproven_timeout + max_rto both are gone (aborted: its
// message was partly received), everything charged given back.
func TestUnprovenTimeoutAtAndBeyond(t *testing.T) {
	cfg := DefaultConfig()
	e := newEndpoint(t, cfg)
	const t0 = int64(1e9)
	e.HandlePacket(t0, firstContact(t, 77, 0, 5000, 0), RxMeta{From: netip.MustParseAddrPort("10.6.6.8:23600")})
	drainTransmits(e, t0)
	held := e.Stats().RecvBuffered
	if e.NumConns() != 1 || held == 0 {
		t.Fatalf("first contact: %d connections, %d bytes held", e.NumConns(), held)
	}
	ut := int64(cfg.UnprovenTimeout)
	runTimers(e, t0+ut-1e6)
	if st := e.Stats(); e.NumConns() != 1 || st.RecvBuffered != held {
		t.Fatalf("1 ms before unproven_timeout: %d connections, %d bytes held (want 1, %d)", e.NumConns(), st.RecvBuffered, held)
	}
	runTimers(e, t0+ut+int64(cfg.MaxRTO))
	if st := e.Stats(); e.NumConns() != 0 || st.RecvBuffered != 0 || st.ConnHeld != 0 {
		t.Fatalf("after unproven_timeout + max_rto: %d connections, %d bytes held, ConnHeld %d",
			e.NumConns(), st.RecvBuffered, st.ConnHeld)
	}
}

// drainTransmits discards what e has to send at now.
func drainTransmits(e *Endpoint, now int64) {
	buf := make([]byte, 70000)
	for {
		if _, ok := e.PollTransmit(now, buf); !ok {
			return
		}
	}
}

// runTimers fires e's timers due up to until.
func runTimers(e *Endpoint, until int64) {
	for {
		d, ok := e.NextTimeout()
		if !ok || d > until {
			return
		}
		e.HandleTimeout(d)
		drainTransmits(e, d)
	}
}

// TestAckClaimsAtAndBeyond: an ACK may claim everything sent and no more: CumPSN up to
// the next PSN to send, AckedPSN below it, Delivered up to the stream sent, SACK bits
// below it, an echoed time we could have stamped. One past any of them and the ACK is
// dropped whole (ackBad).
func TestAckClaimsAtAndBeyond(t *testing.T) {
	p := newPair(t, DefaultConfig(), 5000)
	id, _ := p.a.Dial(0, p.bAddr)
	if _, err := p.a.Send(0, id, make([]byte, 3*4096)); err != nil {
		t.Fatal(err)
	}
	p.drop = func(*Endpoint, []byte) bool { return true } // nothing arrives: all in flight
	for range 10 {
		p.step()
	}
	c := p.a.list[0]
	if c.sndNxt == c.sndUna {
		t.Fatal("nothing in flight")
	}
	at := wire.Ack{CumPSN: c.sndNxt, AckedPSN: c.sndNxt - 1, Delivered: c.streamNext, EchoTxTime: p.now,
		SackBase: c.sndNxt - 64, SackWords: 1, Sack: [wire.MaxSackWords]uint64{1 << 63}}
	if got := p.a.checkAck(p.now, c, &at); got != ackOK {
		t.Fatalf("an ACK claiming exactly what was sent: %d, want ackOK", got)
	}
	for name, f := range map[string]func(a *wire.Ack){
		"CumPSN":     func(a *wire.Ack) { a.CumPSN++ },
		"AckedPSN":   func(a *wire.Ack) { a.AckedPSN++ },
		"Delivered":  func(a *wire.Ack) { a.Delivered++ },
		"SACK bit":   func(a *wire.Ack) { a.SackBase++ },
		"EchoTxTime": func(a *wire.Ack) { a.EchoTxTime++ },
	} {
		a := at
		f(&a)
		if got := p.a.checkAck(p.now, c, &a); got != ackBad {
			t.Errorf("%s one beyond what was sent: %d, want ackBad", name, got)
		}
	}
}

// TestECBlocksPerMessageAtAndBeyond: a message holds parity for at most maxECBlocks
// blocks with data missing: a proven peer's parity for the first maxECBlocks blocks of a
// message whose data did not arrive (none but the first packet's) is kept (charged a record and a buffer each), the
// next block's is dropped (ParityDropped) and charges nothing.
func TestECBlocksPerMessageAtAndBeyond(t *testing.T) {
	cfg := ecConfig(2, 1)
	r := newForgeRig(t, cfg)
	mtu := cfg.MTU
	n := (2*maxECBlocks + 4) * mtu
	psn := r.last.PSN + 1
	d := wire.Data{PSN: psn, AckFloor: psn, MsgID: r.next, MsgLen: uint32(n), PayloadLen: uint16(mtu),
		StreamStart: r.stream, TxTime: r.p.now}
	r.inject(0, d, make([]byte, mtu)) // data packet 0 opens the message; blocks 1.. miss all their data
	s0 := r.p.b.Stats()
	parity := func(b int) {
		q := d
		q.PSN, q.Offset, q.EC = psn+uint32(2*b), uint32(2*b*mtu), wire.EC{K: 2, M: 1}
		r.inject(wire.FlagEC, q, make([]byte, mtu))
	}
	for b := 1; b <= maxECBlocks; b++ {
		parity(b)
	}
	s1 := r.p.b.Stats()
	perBlock := uint64(max(mtu, 4096)) + ecBlockBytes
	if kept := s1.ParityRecv - s1.ParityDropped - s1.ParityRefused - (s0.ParityRecv - s0.ParityDropped - s0.ParityRefused); kept != maxECBlocks ||
		s1.RecvBuffered-s0.RecvBuffered != maxECBlocks*perBlock {
		t.Fatalf("at the bound: %d parity blocks kept, %d bytes charged (want %d, %d)", kept, s1.RecvBuffered-s0.RecvBuffered, maxECBlocks, maxECBlocks*perBlock)
	}
	parity(maxECBlocks + 1)
	s2 := r.p.b.Stats()
	if s2.ParityDropped-s1.ParityDropped != 1 || s2.RecvBuffered != s1.RecvBuffered {
		t.Fatalf("beyond the bound: dropped +%d, charged %+d bytes (want +1, 0)", s2.ParityDropped-s1.ParityDropped, int64(s2.RecvBuffered)-int64(s1.RecvBuffered))
	}
}

// TestIdleTimeoutAtAndBeyond: a proven peer that goes silent half-way through a message
// keeps its state until idle_timeout after its last packet and not after: 1 ms before,
// the connection and its buffers are there; by idle_timeout + max_rto all is freed.
func TestIdleTimeoutAtAndBeyond(t *testing.T) {
	cfg := DefaultConfig()
	p := halfSent(t, cfg)
	c := p.b.list[0]
	if !c.proven {
		t.Fatal("the sender's connection is not proven")
	}
	last := c.lastRecv
	drainTransmits(p.b, p.now)
	runTimers(p.b, last+int64(cfg.IdleTimeout)-1e6)
	if p.b.NumConns() != 1 || p.b.Stats().RecvBuffered < 4<<20 {
		t.Fatalf("1 ms before idle_timeout: %d connections, %d bytes held", p.b.NumConns(), p.b.Stats().RecvBuffered)
	}
	runTimers(p.b, last+int64(cfg.IdleTimeout)+int64(cfg.MaxRTO))
	if st := p.b.Stats(); p.b.NumConns() != 0 || st.RecvBuffered != 0 || st.ConnHeld != 0 {
		t.Fatalf("after idle_timeout + max_rto: %d connections, %d bytes held, ConnHeld %d", p.b.NumConns(), st.RecvBuffered, st.ConnHeld)
	}
}
