package transport

import (
	"bytes"
	"net/netip"
	"testing"
)

// gateFunc is a RecvGate of a function.
type gateFunc func(peer netip.AddrPort, n int, head []byte) bool

func (g gateFunc) Ready(peer netip.AddrPort, n int, head []byte) bool { return g(peer, n, head) }

// A receiver that refuses messages (RNR) for far longer than idle_timeout and
// max_retransmits rounds of back-off: the sender neither fails the messages nor aborts the
// connection, nothing counts as a loss or a retransmission, and once the gate opens every
// message arrives, in order, once.
func TestRNRWaitsWithoutFailing(t *testing.T) {
	cfg := DefaultConfig()
	open := false
	asked := 0
	gate := gateFunc(func(_ netip.AddrPort, n int, head []byte) bool {
		asked++
		return open
	})
	p := newPair(t, cfg, 5000, Hooks{Gate: gate})
	id, err := p.a.Dial(0, p.bAddr)
	if err != nil {
		t.Fatal(err)
	}
	msgs := [][]byte{[]byte("first"), bytes.Repeat([]byte{7}, 200<<10), []byte("third")}
	for _, m := range msgs {
		if _, err := p.a.Send(0, id, m); err != nil {
			t.Fatal(err)
		}
	}
	var got [][]byte
	sent, failed := 0, 0
	poll := func() {
		for ev := range pending(p.b) {
			if ev.Kind == MessageReceived {
				got = append(got, ev.Data)
			}
		}
		for ev := range pending(p.a) {
			switch ev.Kind {
			case MessageSent:
				sent++
			case MessageFailed, ConnClosed:
				failed++
			}
		}
	}
	closedFor := 6 * int64(cfg.IdleTimeout) // 30 s: beyond idle_timeout and any retransmission budget
	p.runUntil(t, closedFor+1e9, func() bool {
		poll()
		return p.now >= closedFor
	})
	if len(got) != 0 || sent != 0 || failed != 0 {
		t.Fatalf("while refusing: %d received, %d sent, %d failed", len(got), sent, failed)
	}
	sa, sb := p.a.Stats(), p.b.Stats()
	if sa.RNRRecv <= uint64(cfg.MaxRetransmits) || sb.RNRSent < sa.RNRRecv {
		t.Fatalf("RNR sent %d, acted on %d: want more than max_retransmits (%d)", sb.RNRSent, sa.RNRRecv, cfg.MaxRetransmits)
	}
	if sa.RetxTimeout+sa.RetxNack+sa.RetxSack != 0 || sa.Timeouts != 0 {
		t.Fatalf("refusals counted as losses: %+v", sa)
	}
	// One refused packet per refused message and back-off at most, however long it
	// lasts: 3 x 30 s / 16 ms.
	if limit := uint64(len(msgs))*uint64(closedFor/rnrMaxDelay) + 256; sa.RNRRecv > limit {
		t.Fatalf("%d refusals in %d ns, want at most %d", sa.RNRRecv, closedFor, limit)
	}
	open = true
	p.runUntil(t, p.now+10e9, func() bool {
		poll()
		return len(got) == len(msgs) && sent == len(msgs)
	})
	for i := range msgs {
		if !bytes.Equal(got[i], msgs[i]) {
			t.Fatalf("message %d differs", i)
		}
	}
	if failed != 0 {
		t.Fatalf("%d failures", failed)
	}
	t.Logf("asked %d, RNR %d, resumed at %d ns", asked, sa.RNRRecv, p.now-closedFor)
}

// Only the first packet of a message is gated: a refusal of one message leaves the
// connection's already-admitted message whole, and the gate sees each message's head.
func TestRNRGatesOnlyNewMessages(t *testing.T) {
	cfg := DefaultConfig()
	var heads []string
	gate := gateFunc(func(_ netip.AddrPort, n int, head []byte) bool {
		heads = append(heads, string(head[:1]))
		return head[0] != 'B' || len(heads) > 3 // B is refused twice
	})
	p := newPair(t, cfg, 5000, Hooks{Gate: gate})
	id, _ := p.a.Dial(0, p.bAddr)
	for _, m := range []string{"A", "B", "C"} {
		if _, err := p.a.Send(0, id, bytes.Repeat([]byte(m), 100)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	p.runUntil(t, 1e9, func() bool {
		for ev := range pending(p.b) {
			if ev.Kind == MessageReceived {
				got = append(got, string(ev.Data[:1]))
			}
		}
		return len(got) == 3
	})
	if s := bytes.Join([][]byte{[]byte(got[0]), []byte(got[1]), []byte(got[2])}, nil); string(s) != "ABC" {
		t.Fatalf("delivered %v, want A B C", got)
	}
	if st := p.b.Stats(); st.RNRSent < 1 {
		t.Fatalf("no refusal: heads %v", heads)
	}
}

// Displace moves a message being received into a Placer's buffer back into the engine's
// chunks: what arrived is kept, the rest lands in chunks, the Placer's buffer is written
// no more, the message is delivered in chunks (Placed 0), whole, and Unplace is not called.
func TestDisplaceMovesPlacedMessage(t *testing.T) {
	r := newPlaceRig(t, false)
	if _, err := r.a.Send(r.now, r.conn, []byte("proves the connection")); err != nil {
		t.Fatal(err)
	}
	r.exchange(nil)
	eventsOf(r.b, MessageReceived)
	big := message(5*PlaceMin+123, 3)
	if _, err := r.a.Send(r.now, r.conn, big); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, MaxDatagram(r.a.Config()))
	for k := 0; k < 3; k++ { // the first three packets arrive, the offset-0 one first
		tx, ok := r.a.PollTransmit(r.now, buf)
		if !ok {
			t.Fatal("nothing to send")
		}
		r.b.HandlePacket(r.now, append(append([]byte(nil), buf[:tx.N]...), tx.Payload...), RxMeta{From: r.aAddr})
	}
	if r.p.asked != 1 || len(r.p.bufs) != 1 {
		t.Fatalf("Place asked %d times", r.p.asked)
	}
	if !r.b.Displace(1) || r.b.Displace(1) || r.b.Displace(0) {
		t.Fatal("Displace: want true once for the placement, then false")
	}
	clear(r.p.bufs[1]) // the Placer reuses its buffer at once
	r.exchange(nil)
	got := eventsOf(r.b, MessageReceived)
	if len(got) != 1 || got[0].Placed != 0 || !bytes.Equal(bytes.Join(got[0].Chunks, nil), big) {
		t.Fatalf("%d delivered, placed %d: want the whole message in chunks", len(got), got[0].Placed)
	}
	if !bytes.Equal(r.p.bufs[1], make([]byte, len(r.p.bufs[1]))) || len(r.p.unplaced) != 0 {
		t.Fatalf("the Placer's buffer was written after Displace, or Unplace called (%v)", r.p.unplaced)
	}
	if st := r.b.Stats(); st.MsgsDisplaced != 1 || st.RecvBuffered != 0 {
		t.Fatalf("MsgsDisplaced %d, RecvBuffered %d", st.MsgsDisplaced, st.RecvBuffered)
	}
}

// TestRNRUnderECNoSlip: under recovery ec a refused first packet must not slip in through
// parity: when a message's other data packets and its block's parity arrive while the
// gate refuses the first, the rebuilt first packet is offered to the gate too, and the
// message is delivered only once the gate lets it, intact. (Before, the rebuild filled the
// refused packet and the message was delivered past the gate.)
func TestRNRUnderECNoSlip(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Recovery.Mode, cfg.Recovery.K, cfg.Recovery.M = RecoveryEC, 4, 2
	open := true
	refusedHeads := 0
	gate := gateFunc(func(_ netip.AddrPort, n int, head []byte) bool {
		if !open {
			refusedHeads++
		}
		return open
	})
	p := newPair(t, cfg, 5000, Hooks{Gate: gate})
	id, err := p.a.Dial(0, p.bAddr)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	sent := 0
	poll := func() {
		for ev := range pending(p.b) {
			if ev.Kind == MessageReceived {
				got = append(got, ev.Data)
			}
		}
		for ev := range pending(p.a) {
			if ev.Kind == MessageSent {
				sent++
			}
		}
	}
	if _, err := p.a.Send(0, id, []byte("warm")); err != nil { // b sees a prove its address
		t.Fatal(err)
	}
	p.runUntil(t, 1e9, func() bool { poll(); return len(got) == 1 && sent == 1 })
	open = false
	msg := patterned(4*cfg.MTU, 9) // one block: 4 data packets and 2 parity
	if _, err := p.a.Send(p.now, id, msg); err != nil {
		t.Fatal(err)
	}
	until := p.now + 2e9
	p.runUntil(t, until+1e9, func() bool { poll(); return p.now >= until })
	st := p.b.Stats()
	t.Logf("parity recv %d refused %d dropped %d rebuilt %d bad %d; rnr sent %d", st.ParityRecv, st.ParityRefused, st.ParityDropped, st.ECRebuilt, st.ECBad, st.RNRSent)
	if len(got) != 1 || st.ParityRecv == 0 || refusedHeads == 0 {
		t.Fatalf("while refusing: %d messages delivered (want only the first), parity received %d, heads refused %d", len(got), st.ParityRecv, refusedHeads)
	}
	open = true
	p.runUntil(t, p.now+10e9, func() bool { poll(); return len(got) == 2 })
	if !bytes.Equal(got[1], msg) {
		t.Fatal("the gated message arrived corrupted")
	}
}
