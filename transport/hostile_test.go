package transport

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

// Regression tests for hostile and broken peers: each failed on main 0bffe78.

// firstContact encodes a first-contact DATA packet (DstConn 0) of one payload byte that
// claims a message of msgLen bytes: 65 bytes on the wire.
func firstContact(t testing.TB, src uint64, msgID, msgLen uint32, streamStart uint64) []byte {
	t.Helper()
	return tinyPacket(t, src, msgID, msgLen, 0, streamStart, 100+msgID)
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestHugeClaimsHoldOnlyWhatArrived (finding 1): 64 first-contact packets of 65 bytes,
// each claiming a 1 GiB message, on one connection and spread over 64 connections, raise
// the live heap by less than 256 MiB, and the engine's own count agrees.
func TestHugeClaimsHoldOnlyWhatArrived(t *testing.T) {
	const claim = 1 << 30
	for _, spread := range []bool{false, true} {
		e := newEndpoint(t, DefaultConfig())
		from := netip.MustParseAddrPort("10.6.6.6:23600")
		before := liveHeap()
		for k := range 64 {
			src, id := uint64(7), uint32(k)
			if spread {
				src, id = uint64(k+1), 0
			}
			e.HandlePacket(1, firstContact(t, src, id, claim, 0), RxMeta{From: from})
		}
		grew := int64(liveHeap()) - int64(before)
		st := e.Stats()
		t.Logf("spread=%v: heap +%d KiB, RecvBuffered %d KiB, conns %d, beyond-window %d",
			spread, grew>>10, st.RecvBuffered>>10, e.NumConns(), st.BeyondWindow)
		if grew >= 256<<20 {
			t.Errorf("spread=%v: live heap grew %d MiB for 64 x 65-byte packets", spread, grew>>20)
		}
		if st.RecvBuffered >= 256<<20 {
			t.Errorf("spread=%v: RecvBuffered %d MiB", spread, st.RecvBuffered>>20)
		}
		if !spread && st.BeyondWindow != 63 {
			// Only the next message in delivery order may exceed the window.
			t.Errorf("one connection: %d messages refused by flow control, want 63", st.BeyondWindow)
		}
		runtime.KeepAlive(e)
	}
}

// TestOverlappingClaimsBoundedByWindow (finding 1, flow control): messages that all claim
// the same stream range cannot multiply the window: the open messages of a connection
// claim at most RecvWindow bytes besides the next one in delivery order.
func TestOverlappingClaimsBoundedByWindow(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RecvWindow = 1 << 20
	e := newEndpoint(t, cfg)
	from := netip.MustParseAddrPort("10.6.6.6:23600")
	const msgLen = 100 << 10 // fits the window on its own
	for k := range 200 {
		// Message 0 is the head; all others claim the stream right after it, overlapping.
		start := uint64(0)
		if k > 0 {
			start = streamLen(msgLen)
		}
		e.HandlePacket(1, firstContact(t, 9, uint32(k), msgLen, start), RxMeta{From: from})
	}
	open := 0
	for _, c := range e.list {
		open += c.rx.len()
		if c.claimed > uint64(cfg.RecvWindow)+streamLen(msgLen) {
			t.Errorf("connection claims %d bytes of stream, window %d + head", c.claimed, cfg.RecvWindow)
		}
	}
	want := 1 + int(uint64(cfg.RecvWindow)/streamLen(msgLen))
	if open > want {
		t.Fatalf("%d messages open, flow control allows %d", open, want)
	}
	if st := e.Stats(); st.RecvBuffered > uint64(open)*msgLen {
		t.Fatalf("RecvBuffered %d for %d open messages", st.RecvBuffered, open)
	}
}

// TestRecvBudget: data beyond RecvBudget is dropped unacknowledged and counted; the
// senders resend it later and every message completes once the budget frees up, because
// the oldest incomplete message may always allocate.
func TestRecvBudget(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxMessage = 256 << 10
	cfg.RecvBudget = 384 << 10                 // one and a half messages
	cfg.CC, cfg.InitialWindow = "fixed", 4<<20 // 16 messages in flight at once
	cfg.MinRTO, cfg.InitialRTO = 20_000, 100_000
	cfg.MaxRetransmits = 200
	p := newPair(t, cfg, 2000)
	rng := rand.New(rand.NewPCG(3, 3))
	p.extra = func(*Endpoint, []byte) int64 { return int64(rng.IntN(20000)) } // interleave messages
	id, _ := p.a.Dial(0, p.bAddr)
	msgs := make([][]byte, 32)
	for i := range msgs {
		msgs[i] = bytes.Repeat([]byte{byte(i + 1)}, cfg.MaxMessage)
		if _, err := p.a.Send(0, id, msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	var l msgLog
	maxBuf := uint64(0)
	p.runUntil(t, 10e9, func() bool {
		maxBuf = max(maxBuf, p.b.Stats().RecvBuffered)
		l.poll(t, p)
		return l.all(len(msgs))
	})
	l.delivered(t, msgs)
	st := p.b.Stats()
	t.Logf("budget drops %d, max buffered %d KiB, done at %.1f ms", st.RecvBudgetDrops, maxBuf>>10, float64(p.now)/1e6)
	if st.RecvBudgetDrops == 0 {
		t.Fatal("the budget never refused anything: the test does not exercise it")
	}
	// One message may finish beyond the budget: its buffers, record, table and spans.
	if lim := uint64(cfg.RecvBudget) + cfg.maxMsgCharge(cfg.MaxMessage); maxBuf > lim || st.RecvBufferedMax > lim {
		t.Fatalf("buffered %d (RecvBufferedMax %d) > budget %d + one message's charge", maxBuf, st.RecvBufferedMax, cfg.RecvBudget)
	}
	if st.RecvBuffered != 0 {
		t.Fatalf("%d bytes still held after delivery", st.RecvBuffered)
	}
}

// TestRecvBudgetRefusesUnacknowledged: with the budget full, new data is dropped, counted,
// and not acknowledged (the PSN is not recorded).
func TestRecvBudgetRefusesUnacknowledged(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxMessage = 1 << 20
	cfg.RecvBudget = 1 << 20
	e := newEndpoint(t, cfg)
	from := netip.MustParseAddrPort("10.6.6.6:23600")
	// Connection 1 opens a 1 MiB message: its first chunk is charged; it is the oldest.
	e.HandlePacket(1, firstContact(t, 1, 0, 1<<20, 0), RxMeta{From: from})
	// Connections 2..8 open messages of a whole budget's worth each.
	for k := 2; k <= 8; k++ {
		e.HandlePacket(1, firstContact(t, uint64(k), 0, 1<<20, 0), RxMeta{From: from})
	}
	st := e.Stats()
	if st.RecvBudgetDrops == 0 {
		t.Fatal("no budget drops with the budget exhausted")
	}
	if st.RecvBuffered > uint64(cfg.RecvBudget) {
		t.Fatalf("RecvBuffered %d beyond the budget %d", st.RecvBuffered, cfg.RecvBudget)
	}
	for _, c := range e.list {
		if c.rx.len() == 0 && c.rxInit && c.tracker.Has(100) {
			t.Fatal("a refused packet's PSN was recorded (it would be acknowledged)")
		}
	}
}

// capture runs p until a has sent a data packet and returns a copy of it, with b's ID.
func captureData(t *testing.T, p *pair) []byte {
	t.Helper()
	var pkt []byte
	old := p.drop
	p.drop = func(from *Endpoint, b []byte) bool {
		var w wire.Packet
		if from == p.a && pkt == nil && w.Decode(b) == nil && w.Type == wire.TypeData && w.DstConn != 0 {
			pkt = append([]byte(nil), b...)
		}
		return old != nil && old(from, b)
	}
	p.runUntil(t, p.now+1e9, func() bool { return pkt != nil })
	p.drop = old
	return pkt
}

// TestForgedAcksCompleteNothing (finding 2): an attacker that knows both connection IDs
// and spoofs the receiver's address and port sends 4,000 ACKs with guessed PSNs (CumPSN
// values 2^30 apart, SACK bitmaps anywhere, any Delivered) while the receiver gets
// nothing: no message is reported sent, the connection is not poisoned, and once the
// path heals every message is delivered and only then reported sent.
func TestForgedAcksCompleteNothing(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxRetransmits = 100
	cfg.MaxRTO = 2_000_000
	p := newPair(t, cfg, 5000)
	id, _ := p.a.Dial(0, p.bAddr)
	if _, err := p.a.Send(0, id, make([]byte, 2<<20)); err != nil {
		t.Fatal(err)
	}
	data := captureData(t, p) // a DATA packet after a learnt b's ID (DstConn set)
	var hdr wire.Packet
	if err := hdr.Decode(data); err != nil {
		t.Fatal(err)
	}
	// Let the first message through, then cut a->b and queue more.
	p.runUntil(t, p.now+1e9, func() bool { return p.b.Stats().MsgsDelivered == 1 && p.a.Stats().MsgsSent == 1 })
	drainEvents(p.a)
	drainEvents(p.b)
	p.drop = func(from *Endpoint, b []byte) bool { return from == p.a }
	msgs := make([][]byte, 10)
	for i := range msgs {
		msgs[i] = bytes.Repeat([]byte{byte(i)}, 10000+i)
		if _, err := p.a.Send(p.now, id, msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(13, 14))
	buf := make([]byte, wire.MaxAckLen)
	before := p.a.Stats()
	for k := range 4000 {
		f := wire.Packet{Header: wire.Header{Type: wire.TypeAck, DstConn: hdr.SrcConn, SrcConn: hdr.DstConn,
			ReplyPort: p.bAddr.Port()}}
		a := &f.Ack
		a.CumPSN = hdr.Data.PSN + uint32(k%4)<<30 + uint32(rng.IntN(1<<16))
		if k%2 == 0 {
			a.CumPSN = rng.Uint32()
		}
		a.SackBase = a.CumPSN - uint32(rng.IntN(512))
		a.SackWords = 4
		for w := range a.Sack {
			a.Sack[w] = rng.Uint64()
		}
		a.AckedPSN = a.CumPSN - 1
		a.EchoTxTime = p.now - int64(rng.IntN(100000))
		a.Delivered = rng.Uint64N(1 << 20)
		a.Window = 64 << 20
		n, err := f.Encode(buf)
		if err != nil {
			t.Fatal(err)
		}
		p.a.HandlePacket(p.now, buf[:n], RxMeta{From: p.bAddr})
		if k%100 == 0 {
			p.step()
		}
	}
	for ev := range pending(p.a) {
		if ev.Kind == MessageSent {
			t.Fatalf("message %d reported sent while the receiver got nothing", ev.MsgID)
		}
	}
	st := p.a.Stats()
	t.Logf("forged ACKs: bad %d stale %d", st.BadAcks-before.BadAcks, st.StaleAcks-before.StaleAcks)
	if st.BadAcks+st.StaleAcks-before.BadAcks-before.StaleAcks < 3900 {
		t.Fatalf("only %d of 4,000 forged ACKs counted as bad or stale", st.BadAcks+st.StaleAcks-before.BadAcks-before.StaleAcks)
	}
	// Heal: every message arrives, byte-exact, and is reported sent.
	p.drop = nil
	var l msgLog
	p.runUntil(t, p.now+20e9, func() bool {
		l.poll(t, p)
		if len(l.sent) > len(l.got) {
			t.Fatalf("%d reported sent (last msg %d), %d delivered; b stats %+v", len(l.sent), l.sent[len(l.sent)-1], len(l.got), p.b.Stats())
		}
		return l.all(len(msgs))
	})
	l.delivered(t, msgs)
}

func drainEvents(e *Endpoint) {
	for range pending(e) {
	}
}

// TestAckFromWrongPortDropped: an ACK with the right IDs and host but another reply port
// is a protocol violation and acknowledges nothing.
func TestAckFromWrongPortDropped(t *testing.T) {
	p := newPair(t, DefaultConfig(), 5000)
	id, _ := p.a.Dial(0, p.bAddr)
	if _, err := p.a.Send(0, id, make([]byte, 2<<20)); err != nil {
		t.Fatal(err)
	}
	data := captureData(t, p)
	var hdr wire.Packet
	if err := hdr.Decode(data); err != nil {
		t.Fatal(err)
	}
	f := wire.Packet{Header: wire.Header{Type: wire.TypeAck, DstConn: hdr.SrcConn, SrcConn: hdr.DstConn, ReplyPort: 9999}}
	f.Ack = wire.Ack{CumPSN: hdr.Data.PSN + 1, AckedPSN: hdr.Data.PSN, SackBase: hdr.Data.PSN + 1, SackWords: 1, EchoTxTime: p.now}
	buf := make([]byte, wire.MaxAckLen)
	n, err := f.Encode(buf)
	if err != nil {
		t.Fatal(err)
	}
	before := p.a.Stats()
	p.a.HandlePacket(p.now, buf[:n], RxMeta{From: netip.AddrPortFrom(p.bAddr.Addr(), 9999)})
	st := p.a.Stats()
	if st.ProtoViolations != before.ProtoViolations+1 || st.AcksRecv != before.AcksRecv {
		t.Fatalf("ACK from the wrong port processed: violations %d->%d, acks %d->%d",
			before.ProtoViolations, st.ProtoViolations, before.AcksRecv, st.AcksRecv)
	}
}

// TestAckFloorCannotSkip (finding 2, receiver side): a DATA packet whose AckFloor is
// ahead of what the receiver got is refused, so a poisoned sender (or a forger) cannot
// make the receiver skip PSNs it never received.
func TestAckFloorCannotSkip(t *testing.T) {
	p := newPair(t, DefaultConfig(), 5000)
	id, _ := p.a.Dial(0, p.bAddr)
	if _, err := p.a.Send(0, id, make([]byte, 2<<20)); err != nil {
		t.Fatal(err)
	}
	data := captureData(t, p)
	var f wire.Packet
	if err := f.Decode(data); err != nil {
		t.Fatal(err)
	}
	p.runUntil(t, p.now+1e9, func() bool { return len(p.inflight) == 0 && p.b.Stats().MsgsDelivered == 1 })
	var c *conn
	for _, x := range p.b.list {
		c = x
	}
	cum := c.tracker.Cum()
	f.Data.AckFloor = cum + 1000
	f.Data.PSN = cum + 1001
	f.Data.MsgID++
	f.Data.StreamStart = c.delivered
	f.Payload = f.Payload[:f.Data.PayloadLen]
	buf := make([]byte, 70000)
	n, err := f.Encode(buf)
	if err != nil {
		t.Fatal(err)
	}
	before := p.b.Stats()
	p.b.HandlePacket(p.now, buf[:n], RxMeta{From: p.aAddr})
	if c.tracker.Cum() != cum {
		t.Fatalf("receiver skipped from %d to %d on a forged floor", cum, c.tracker.Cum())
	}
	if p.b.Stats().ProtoViolations != before.ProtoViolations+1 {
		t.Fatal("floor ahead of the cumulative point not counted")
	}
}

// TestConnFloodThenHonestPeer (finding 4): 20,000 spoofed first contacts with random
// connection IDs fill the table; one second later an honest peer is accepted and its
// message delivered; the table never exceeds MaxConns.
func TestConnFloodThenHonestPeer(t *testing.T) {
	p := newPair(t, DefaultConfig(), 5000)
	rng := rand.New(rand.NewPCG(21, 22))
	for k := range 20000 {
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 66, byte(k >> 8), byte(k)}), uint16(1024+rng.IntN(60000)))
		p.b.HandlePacket(int64(k)*50_000, firstContact(t, rng.Uint64()|1, 0, 1+uint32(rng.IntN(1<<20)), 0), RxMeta{From: from})
		if p.b.NumConns() > p.b.cfg.MaxConns {
			t.Fatalf("%d connections, cap %d", p.b.NumConns(), p.b.cfg.MaxConns)
		}
		if k%64 == 0 {
			for {
				if _, ok := p.b.PollTransmit(int64(k)*50_000, p.buf); !ok {
					break
				}
			}
		}
	}
	drainEvents(p.b)
	p.now = 20000*50_000 + 1e9 // one second after the flood
	st := p.b.Stats()
	t.Logf("after flood: conns %d evicted %d expired %d buffered %d KiB", p.b.NumConns(), st.ConnsEvicted, st.ConnsExpired, st.RecvBuffered>>10)
	if st.RecvBufferedMax > uint64(p.b.cfg.RecvBudget)/unprovenShare {
		t.Fatalf("spoofed first contacts made us hold %d MiB, more than the unproven share", st.RecvBufferedMax>>20)
	}
	id, _ := p.a.Dial(p.now, p.bAddr)
	msg := bytes.Repeat([]byte("honest"), 50000)
	if _, err := p.a.Send(p.now, id, msg); err != nil {
		t.Fatal(err)
	}
	got := false
	p.runUntil(t, p.now+1e9, func() bool {
		for ev := range pending(p.b) {
			if ev.Kind == MessageReceived && ev.Peer.Addr() == p.aAddr.Addr() {
				if !bytes.Equal(ev.Data, msg) {
					t.Fatal("honest message corrupted")
				}
				got = true
			}
		}
		return got
	})
}

// TestSilentSenderPartialFreed (finding 5): a sender that vanishes half-way through a
// message leaves nothing behind: after idle_timeout the receiver has freed the buffer
// and the connection.
func TestSilentSenderPartialFreed(t *testing.T) {
	cfg := DefaultConfig()
	p := halfSent(t, cfg)
	start := p.now
	for p.now < start+int64(cfg.IdleTimeout)+1e6 && p.b.NumConns() > 0 {
		for {
			if _, ok := p.b.PollTransmit(p.now, p.buf); !ok {
				break
			}
		}
		d, ok := p.b.NextTimeout()
		if !ok {
			break
		}
		p.now = max(p.now, d)
		p.b.HandleTimeout(p.now)
	}
	st := p.b.Stats()
	if st.RecvBuffered != 0 || p.b.NumConns() != 0 {
		t.Fatalf("after idle_timeout: %d bytes and %d connections held", st.RecvBuffered, p.b.NumConns())
	}
	if p.now > start+int64(cfg.IdleTimeout)+int64(cfg.MaxRTO) {
		t.Fatalf("freed only at %d ns after the sender stopped", p.now-start)
	}
}

// TestAbortResetsPeer (finding 5): a sender that aborts (its application gave up, or a
// RESET, forged or not, made it abort) tells the receiver, which frees its partial message
// at once.
func TestAbortResetsPeer(t *testing.T) {
	for _, how := range []string{"abort", "forged-reset"} {
		p := newPair(t, DefaultConfig(), 5000)
		id, _ := p.a.Dial(0, p.bAddr)
		if _, err := p.a.Send(0, id, make([]byte, 8<<20)); err != nil {
			t.Fatal(err)
		}
		data := captureData(t, p)
		var hdr wire.Packet
		if err := hdr.Decode(data); err != nil {
			t.Fatal(err)
		}
		p.runUntil(t, 1e9, func() bool { return p.b.Stats().RecvBuffered >= 2<<20 })
		switch how {
		case "abort":
			if err := p.a.Abort(p.now, id); err != nil {
				t.Fatal(err)
			}
		case "forged-reset":
			f := wire.Packet{Header: wire.Header{Type: wire.TypeReset, DstConn: hdr.SrcConn, SrcConn: hdr.DstConn, ReplyPort: p.bAddr.Port()}}
			buf := make([]byte, 64)
			n, _ := f.Encode(buf)
			p.a.HandlePacket(p.now, buf[:n], RxMeta{From: p.bAddr})
		}
		if p.a.NumConns() != 0 {
			t.Fatalf("%s: sender still has the connection", how)
		}
		deadline := p.now + 1e6
		for p.now < deadline && (p.b.NumConns() != 0 || len(p.inflight) > 0) {
			if !p.step() {
				break
			}
		}
		if st := p.b.Stats(); st.RecvBuffered != 0 || p.b.NumConns() != 0 {
			t.Fatalf("%s: receiver holds %d bytes and %d connections after the sender aborted", how, st.RecvBuffered, p.b.NumConns())
		}
	}
}

// TestIdleConnectionsExpireAndRedial: idle connections are forgotten (the dialler first,
// so that it re-dials rather than reusing what the peer dropped), and a message after a
// long pause is delivered on a new connection, not failed.
func TestIdleConnectionsExpireAndRedial(t *testing.T) {
	cfg := DefaultConfig()
	p := newPair(t, cfg, 5000)
	id, _ := p.a.Dial(0, p.bAddr)
	if _, err := p.a.Send(0, id, []byte("one")); err != nil {
		t.Fatal(err)
	}
	p.runUntil(t, 1e9, func() bool { return p.b.Stats().MsgsDelivered == 1 && p.a.Stats().MsgsSent == 1 })
	// Let time pass with nothing to send: both sides forget the connection.
	for p.step() {
	}
	if p.a.NumConns() != 0 || p.b.NumConns() != 0 {
		t.Fatalf("idle connections kept: a %d b %d", p.a.NumConns(), p.b.NumConns())
	}
	if _, err := p.a.Send(p.now, id, []byte("x")); err != ErrUnknownConn {
		t.Fatalf("send on a forgotten connection: %v", err)
	}
	id2, _ := p.a.Dial(p.now, p.bAddr)
	if _, err := p.a.Send(p.now, id2, []byte("two")); err != nil {
		t.Fatal(err)
	}
	p.runUntil(t, p.now+1e9, func() bool { return p.b.Stats().MsgsDelivered == 2 && p.a.Stats().MsgsSent == 2 })
	if st := p.a.Stats(); st.MsgsFailed != 0 {
		t.Fatalf("%d messages failed", st.MsgsFailed)
	}
}

// TestOffsetReach: a packet may land at most PSNWindow packets beyond what arrived of its
// message (no honest sender's window lets it send further); at the limit it is accepted,
// beyond it refused unacknowledged, so a claim cannot spread chunks over a whole message.
func TestOffsetReach(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PSNWindow = 256
	e := newEndpoint(t, cfg)
	from := netip.MustParseAddrPort("10.6.6.6:23600")
	reach := uint32(cfg.PSNWindow * cfg.MTU)
	send := func(psn, off uint32) {
		p := wire.Packet{Header: wire.Header{Type: wire.TypeData, SrcConn: 5}}
		p.Data = wire.Data{PSN: psn, AckFloor: 100, MsgLen: 1 << 30, Offset: off, PayloadLen: 1}
		p.Payload = []byte{1}
		b := make([]byte, 128)
		n, err := p.Encode(b)
		if err != nil {
			t.Fatal(err)
		}
		e.HandlePacket(1, b[:n], RxMeta{From: from})
	}
	send(100, reach) // nothing arrived yet: offset reach is one byte too far
	if st := e.Stats(); st.BeyondWindow != 1 || st.RecvBuffered != 0 {
		t.Fatalf("offset %d with nothing received: beyond %d, buffered %d", reach, st.BeyondWindow, st.RecvBuffered)
	}
	send(101, reach-1) // at the limit
	if st := e.Stats(); st.BeyondWindow != 1 || st.RecvBuffered == 0 {
		t.Fatalf("offset %d: beyond %d, buffered %d", reach-1, st.BeyondWindow, st.RecvBuffered)
	}
	send(102, reach) // one byte arrived: the limit moved by one
	if st := e.Stats(); st.BeyondWindow != 1 {
		t.Fatalf("offset %d after 1 byte: beyond %d", reach, st.BeyondWindow)
	}
	send(103, reach+2) // two bytes arrived: reach+1 is the last offset allowed
	if st := e.Stats(); st.BeyondWindow != 2 {
		t.Fatalf("offset %d after 2 bytes: beyond %d, want the refusal counted", reach+2, st.BeyondWindow)
	}
	for _, c := range e.list {
		if c.tracker.Has(100) || c.tracker.Has(103) {
			t.Fatal("a refused packet's PSN was recorded (it would be acknowledged)")
		}
	}
}

// TestConnProgressCounters: ConnInfo reports the payload bytes the peer acknowledged
// (sender) and the new payload bytes received (receiver), the network progress a CLI shows.
func TestConnProgressCounters(t *testing.T) {
	p := newPair(t, DefaultConfig(), 5000)
	id, _ := p.a.Dial(0, p.bAddr)
	const size = 3 << 20
	if _, err := p.a.Send(0, id, make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	half := false
	p.runUntil(t, 1e9, func() bool {
		ci, ok := p.a.ConnInfo(id)
		if ok && ci.BytesAcked > 0 && ci.BytesAcked < size {
			half = true
		}
		return p.a.Stats().MsgsSent == 1
	})
	ci, ok := p.a.ConnInfo(id)
	if !ok || ci.BytesAcked != size || !half {
		t.Fatalf("sender: bytes acked %d (seen part-way: %v), want %d", ci.BytesAcked, half, size)
	}
	conns := p.b.Conns(nil)
	if len(conns) != 1 || conns[0].BytesReceived != size {
		t.Fatalf("receiver conns %+v, want %d bytes received", conns, size)
	}
}

// halfSent returns a pair of cfg whose a has sent b 4 MiB of an 8 MiB message and is to
// vanish: from then on only b runs.
func halfSent(t *testing.T, cfg Config) *pair {
	t.Helper()
	p := newPair(t, cfg, 5000)
	id, _ := p.a.Dial(0, p.bAddr)
	if _, err := p.a.Send(0, id, make([]byte, 8<<20)); err != nil {
		t.Fatal(err)
	}
	p.runUntil(t, 1e9, func() bool { return p.b.Stats().RecvBuffered >= 4<<20 })
	return p
}
