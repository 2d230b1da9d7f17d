package xsk_test

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/udp/blast"
	"github.com/smartt-transport/smartt/transport/udp/xsk"
)

// openTx resolves dst from ns and opens a send-only AF_XDP socket on the route's
// interface, skipping the test only when the kernel lacks AF_XDP.
func openTx(t testing.TB, ns *nstest.NS, dst netip.Addr, cfg xsk.Config) (*xsk.Socket, xsk.Route) {
	t.Helper()
	var rt xsk.Route
	if err := ns.Do(func() error {
		var err error
		rt, err = xsk.Resolve(nil, dst, 2*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	cfg.Ifindex = rt.Ifindex
	skipUnavailable(t, ns, cfg)
	return nstest.Open(t, ns, func() (*xsk.Socket, error) { return xsk.Open(cfg) }), rt
}

// skipUnavailable skips the test when the kernel lacks AF_XDP (the probe's reason), and
// fails it for any other probe error: on a kernel that has it, it must work.
func skipUnavailable(t testing.TB, ns *nstest.NS, cfg xsk.Config) {
	t.Helper()
	var perr error
	ns.Do(func() error { perr = xsk.Probe(cfg); return nil })
	var xe *xsk.Error
	if errors.As(perr, &xe) && xe.Step == "socket" && errors.Is(perr, syscall.EAFNOSUPPORT) {
		t.Skipf("AF_XDP unavailable: %v", perr)
	}
	if perr != nil {
		t.Fatalf("probe: %v", perr)
	}
}

// Frames we build cross the veth and arrive at a plain UDP socket with the source port,
// TOS byte and payload we chose: a wrong checksum, length or MAC would make the kernel
// drop them.
func TestSendUDP4(t *testing.T) {
	tp := nstest.Pair(t)
	rx := nstest.Open(t, tp.B, func() (*net.UDPConn, error) {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(tp.AddrB, 0)))
		if err == nil {
			err = blast.ForceBuffers(c, 16<<20, 0)
		}
		return c, err
	})
	rc := ipv4.NewPacketConn(rx)
	if err := rc.SetControlMessage(ipv4.FlagTTL|ipv4.FlagDst, true); err != nil {
		t.Fatal(err)
	}
	dport := rx.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	s, rt := openTx(t, tp.A, tp.AddrB, xsk.Config{NoRX: true, Frames: 512, RingSize: 256})
	const n = 200
	pkts := make([]xsk.TxPacket, n)
	for i := range pkts {
		pl := make([]byte, 100+i*44)
		for j := range pl {
			pl[j] = byte(i + j)
		}
		pkts[i] = xsk.TxPacket{Payload: pl, SrcPort: uint16(30000 + i), DstPort: dport, TOS: 0x28<<2 | 2}
	}
	if k, err := s.SendUDP4(&rt.Hop, pkts); k != n || err != nil {
		t.Fatalf("SendUDP4: %d, %v", k, err)
	}
	buf := make([]byte, 9000)
	rx.SetReadDeadline(time.Now().Add(2 * time.Second))
	for i := range n {
		k, cm, src, err := rc.ReadFrom(buf)
		if err != nil {
			t.Fatalf("packet %d: %v (stats %+v)", i, err, s.Stats())
		}
		ap := src.(*net.UDPAddr).AddrPort()
		want := pkts[i]
		if ap.Addr().Unmap() != tp.AddrA || ap.Port() != want.SrcPort || string(buf[:k]) != string(want.Payload) {
			t.Fatalf("packet %d from %v, %d bytes; want from %v:%d, %d bytes", i, ap, k, tp.AddrA, want.SrcPort, len(want.Payload))
		}
		if cm.TTL != 64 {
			t.Fatalf("packet %d TTL %d", i, cm.TTL)
		}
	}
	// Payloads past 4096-42 bytes span two or three frames.
	if st := s.Stats(); st.TxPackets != n || st.TxFrames <= n {
		t.Fatalf("stats %+v: want %d packets in more frames", st, n)
	}
}

// Sending allocates nothing per packet (the receiver's drops do not matter here).
func TestSendZeroAllocs(t *testing.T) {
	tp := nstest.Pair(t)
	s, rt := openTx(t, tp.A, tp.AddrB, xsk.Config{NoRX: true, Frames: 512, RingSize: 256})
	pkts := make([]xsk.TxPacket, 64)
	pl := make([]byte, 4096)
	for i := range pkts {
		pkts[i] = xsk.TxPacket{Payload: pl, SrcPort: uint16(40000 + i), DstPort: 9}
	}
	send := func() {
		if k, err := s.SendUDP4(&rt.Hop, pkts); k != len(pkts) || err != nil {
			t.Fatalf("SendUDP4: %d, %v", k, err)
		}
	}
	send()
	if n := testing.AllocsPerRun(20, send); n != 0 {
		t.Fatalf("%.1f allocations per batch of 64, want 0", n)
	}
}
