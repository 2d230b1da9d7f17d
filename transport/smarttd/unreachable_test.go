package smarttd_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// A message to a loopback port with no daemon fails fast through the kernel's ICMP port
// unreachable, naming the peer, instead of after the retransmission budget.
func TestE2EUnreachablePeerFailsFast(t *testing.T) {
	d := startIn(t, nil, netip.MustParseAddrPort("127.0.0.93:23600"), tempDir(t), nil)
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	pc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := session(t, ctx, d, 1)
	start := time.Now()
	_, err = s.Send(ctx, dead, 2, []byte("hello"))
	took := time.Since(start)
	if err == nil {
		t.Fatal("send to a port with no daemon succeeded")
	}
	want := "nothing listening at " + dead.String()
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("failure %q after %v, want it to name %q", err, took, want)
	}
	// Loose bound for a loaded machine; the retransmission budget takes 2.4 s or more.
	if took > 2*time.Second {
		t.Fatalf("failed after %v", took)
	}
	if st := d.Node.Stats(); st.UnreachableActed != 1 {
		t.Errorf("engine acted on %d ICMP reports, want 1", st.UnreachableActed)
	}
	t.Logf("failed after %v: %v", took, err)
}

// A message to a daemon's EV port (a bound socket, so no ICMP comes back) fails as fast:
// the EV socket answers the first contact with an EV-port RESET, and the failure names
// the address and the mistake; the same daemon's listen port delivers.
func TestE2EEVPortFailureNamesPeer(t *testing.T) {
	dir := tempDir(t)
	a := startIn(t, nil, netip.MustParseAddrPort("127.0.0.94:23600"), dir, nil)
	b := startIn(t, nil, netip.MustParseAddrPort("127.0.0.95:23600"), dir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sa, sb := session(t, ctx, a, 1), session(t, ctx, b, 2)
	if _, err := sa.Send(ctx, b.Config.Listen, 2, []byte("to the listen port")); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Recv(ctx); err != nil {
		t.Fatal(err)
	}
	for _, port := range []uint16{1, 7} { // EV 0 and EV 6 of B's pool
		ev := netip.AddrPortFrom(b.Config.Listen.Addr(), b.Config.Listen.Port()+port)
		start := time.Now()
		_, err := sa.Send(ctx, ev, 2, []byte("to an EV port"))
		took := time.Since(start)
		if err == nil {
			t.Fatal("send to an EV port succeeded")
		}
		if want := "nothing listening at " + ev.String() + ": it is an EV (source) port of a smartt daemon"; !strings.Contains(err.Error(), want) {
			t.Fatalf("failure %q, want it to contain %q", err, want)
		}
		// Loose bound for a loaded machine; the retransmission budget takes 2.4 s or more.
		if took > 2*time.Second {
			t.Errorf("failed after %v", took)
		}
		t.Logf("failed after %v: %v", took, err)
	}
}
