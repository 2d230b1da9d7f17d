package transport

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

// An ICMP report fails the messages of a connection whose peer never answered, at once,
// naming the peer; a connection the peer has answered on ignores it (forgeable).
func TestUnreachableFailsOnlyUnprovenDial(t *testing.T) {
	p := newPair(t, DefaultConfig(), 3000)
	silent := netip.MustParseAddrPort("10.0.0.9:23600")
	dead, _ := p.a.Dial(0, silent)
	if _, err := p.a.Send(0, dead, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	live, _ := p.a.Dial(0, p.bAddr)
	msg := bytes.Repeat([]byte{1}, 50000)
	if _, err := p.a.Send(0, live, msg); err != nil {
		t.Fatal(err)
	}
	// Let the live peer answer (not all of the message is acknowledged yet).
	p.runUntil(t, 1e9, func() bool { return p.a.conns[uint64(live)].peerID != 0 })
	if n := p.a.Unreachable(p.now, p.bAddr, UnreachablePort); n != 0 {
		t.Fatalf("a connection the peer answered on was aborted by an ICMP report (%d)", n)
	}
	if n := p.a.Unreachable(p.now, silent, UnreachablePort); n != 1 {
		t.Fatalf("unproven dial: %d aborted, want 1", n)
	}
	if n := p.a.Unreachable(p.now, netip.MustParseAddrPort("10.0.0.7:1"), UnreachableHost); n != 0 {
		t.Fatalf("unknown peer: %d aborted", n)
	}
	var failed *Event
	for _, ev := range events(p.a) {
		if ev.Kind == MessageFailed {
			if ev.Conn != dead {
				t.Fatalf("failed a message of the live connection: %+v", ev)
			}
			failed = &ev
		}
	}
	if failed == nil {
		t.Fatal("no MessageFailed for the unproven dial")
	}
	want := "nothing listening at 10.0.0.9:23600 (ICMP port unreachable)"
	if !strings.Contains(failed.Err.Error(), want) || !errors.Is(failed.Err, ErrUnreachable) {
		t.Fatalf("failure %q, want it to contain %q and match ErrUnreachable", failed.Err, want)
	}
	st := p.a.Stats()
	if st.UnreachableActed != 1 || st.UnreachableIgnored != 1 || st.UnreachableNoConn != 1 {
		t.Fatalf("stats acted %d ignored %d noconn %d, want 1 1 1", st.UnreachableActed, st.UnreachableIgnored, st.UnreachableNoConn)
	}
	// The live connection still delivers.
	p.runUntil(t, 5e9, func() bool {
		for _, ev := range events(p.b) {
			if ev.Kind == MessageReceived {
				return true
			}
		}
		return false
	})
}

// A connection failed by retransmissions names its peer, and that it never answered.
func TestRetransmitFailureNamesPeer(t *testing.T) {
	p := newPair(t, DefaultConfig(), 3000)
	p.drop = func(*Endpoint, []byte) bool { return true }
	id, _ := p.a.Dial(0, p.bAddr)
	if _, err := p.a.Send(0, id, []byte("x")); err != nil {
		t.Fatal(err)
	}
	got := firstFailure(t, p)
	if !strings.Contains(got.Error(), "(peer "+p.bAddr.String()+" never answered") ||
		!(errors.Is(got, ErrRetransmits) || errors.Is(got, ErrIdle)) {
		t.Fatalf("failure %q does not name the peer %v or lost its sentinel", got, p.bAddr)
	}
}

// A connection the peer answered on, then failed by retransmissions, names the peer
// without the never-answered hint.
func TestRetransmitFailureAfterAnswerNamesPeer(t *testing.T) {
	p := newPair(t, DefaultConfig(), 3000)
	id, _ := p.a.Dial(0, p.bAddr)
	if _, err := p.a.Send(0, id, []byte("first")); err != nil {
		t.Fatal(err)
	}
	p.runUntil(t, 1e9, func() bool { return p.a.conns[uint64(id)].peerID != 0 })
	p.drop = func(*Endpoint, []byte) bool { return true }
	if _, err := p.a.Send(p.now, id, []byte("second")); err != nil {
		t.Fatal(err)
	}
	got := firstFailure(t, p)
	if want := "(peer " + p.bAddr.String() + ")"; !strings.Contains(got.Error(), want) {
		t.Fatalf("failure %q, want it to contain %q", got, want)
	}
}

// BenchmarkUnreachableScan is the cost of one ICMP report (forged, for a peer with no
// connection) at 4,096 connections: the engine scans them all.
func BenchmarkUnreachableScan(b *testing.B) {
	p := newPair(b, DefaultConfig(), 3000)
	for i := range 4096 {
		if _, err := p.a.Dial(0, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 23600)); err != nil {
			b.Fatal(err)
		}
	}
	other := netip.MustParseAddrPort("10.9.9.9:1")
	b.ReportAllocs()
	for b.Loop() {
		p.a.Unreachable(0, other, UnreachablePort)
	}
}

// An EV-port RESET (SrcConn = the dialler's own ID, from the dialled address) fails an
// unanswered dial at once, naming the address as an EV port; the same RESET on a
// connection the peer answered on, or from another address, is ignored.
func TestEVPortResetFailsUnansweredDial(t *testing.T) {
	p := newPair(t, DefaultConfig(), 3000)
	ev := netip.MustParseAddrPort("10.0.0.9:23601")
	dead, _ := p.a.Dial(0, ev)
	if _, err := p.a.Send(0, dead, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	reset := func(from netip.AddrPort, id ConnID) {
		pkt := wire.Packet{Header: wire.Header{Type: wire.TypeReset, DstConn: uint64(id), SrcConn: uint64(id)}}
		b := make([]byte, wire.ResetLen)
		n, err := pkt.Encode(b)
		if err != nil {
			t.Fatal(err)
		}
		p.a.HandlePacket(p.now, b[:n], RxMeta{From: from})
	}
	reset(netip.MustParseAddrPort("10.0.0.8:23601"), dead) // another address: ignored
	if c := p.a.conns[uint64(dead)]; c == nil || c.dead {
		t.Fatal("a RESET from another address aborted the dial")
	}
	live, _ := p.a.Dial(0, p.bAddr)
	if _, err := p.a.Send(0, live, bytes.Repeat([]byte{1}, 50000)); err != nil {
		t.Fatal(err)
	}
	p.runUntil(t, 1e9, func() bool { return p.a.conns[uint64(live)].peerID != 0 })
	reset(p.bAddr, live) // answered: ignored
	reset(ev, dead)
	var failed []Event
	for _, e := range events(p.a) {
		if e.Kind == MessageFailed {
			failed = append(failed, e)
		}
	}
	if len(failed) != 1 || failed[0].Conn != dead {
		t.Fatalf("failed %+v, want the EV-port dial's message only", failed)
	}
	want := "nothing listening at 10.0.0.9:23601: it is an EV (source) port of a smartt daemon"
	if err := failed[0].Err; !strings.Contains(err.Error(), want) || !errors.Is(err, ErrUnreachable) {
		t.Fatalf("failure %q, want %q", err, want)
	}
	if c := p.a.conns[uint64(live)]; c == nil || c.dead {
		t.Fatal("the answered connection was aborted")
	}
	if st := p.a.Stats(); st.UnreachableActed != 1 {
		t.Errorf("UnreachableActed %d, want 1", st.UnreachableActed)
	}
}

// firstFailure runs p until a reports a message failed, within 100 s, and returns why.
func firstFailure(t *testing.T, p *pair) error {
	t.Helper()
	var got error
	p.runUntil(t, 1e11, func() bool {
		for _, ev := range events(p.a) {
			if ev.Kind == MessageFailed {
				got = ev.Err
			}
		}
		return got != nil
	})
	return got
}
