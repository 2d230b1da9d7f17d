//go:build linux

package xsk_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/udp/xsk"
)

// TestReaderOnlyDst: a reader told its destination (SetDst) delivers only datagrams to
// that address and port, whatever the XDP program in front of it redirects (here one
// without an address check, for two ports): two datagrams to another address of the
// subnet (frames to our MAC) and one to the other port are counted in WrongDst and
// dropped; the one to ours is delivered.
func TestReaderOnlyDst(t *testing.T) {
	tp := nstest.Pair(t)
	const port = 23900
	s, _, _ := rxSide(t, tp.B, port, port+1)
	mac := tp.B.Interface(t, "veth0").HardwareAddr
	other := netip.MustParseAddr("10.99.0.77")
	tp.A.MustExec(t, "ip", "neigh", "replace", other.String(), "lladdr", mac.String(), "dev", "veth0", "nud", "permanent")
	tx := nstest.Open(t, tp.A, func() (*net.UDPConn, error) {
		return net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(tp.AddrA, 0)))
	})
	ours := netip.AddrPortFrom(tp.AddrB, port)
	for _, to := range []netip.AddrPort{
		netip.AddrPortFrom(other, port), netip.AddrPortFrom(other, port),
		netip.AddrPortFrom(tp.AddrB, port+1), ours,
	} {
		if _, err := tx.WriteToUDPAddrPort([]byte("x"), to); err != nil {
			t.Fatal(err)
		}
	}
	rd := xsk.NewRxReader(s, 64)
	rd.SetDst(ours)
	got := readN(t, rd, 1, time.Second)
	readN(t, rd, 1, 200*time.Millisecond) // the rest, if any lag
	if st := rd.Stats(); len(got) != 1 || got[0].Dst != ours || st.WrongDst != 3 {
		t.Fatalf("delivered %d (want 1, to %v), %d to another destination counted (want 3)", len(got), ours, st.WrongDst)
	}
}
