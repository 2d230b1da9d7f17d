//go:build linux

package udp_test

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/udp"
)

// TestAFXDPOnlyOurAddress: with datapath afxdp, datagrams to the listen port at another
// address of the subnet (a frame to our interface's MAC) and at the subnet broadcast are
// not read: 100 and 50 of them, then one to our address, and the one is all that arrives.
func TestAFXDPOnlyOurAddress(t *testing.T) {
	tp := nstest.Pair(t)
	needAFXDP(t, tp.A)
	b := openIn(t, tp.B, udp.Config{Listen: netip.AddrPortFrom(tp.AddrB, 23600), EVS: 8, Datapath: udp.DatapathAFXDP})
	if cp := b.Caps(); cp.Datapath != udp.DatapathAFXDP {
		t.Fatalf("caps %+v, want the afxdp datapath", cp)
	}
	mac := tp.B.Interface(t, "veth0").HardwareAddr
	other := netip.MustParseAddr("10.99.0.77") // in B's subnet, not B's: its frames reach B's interface
	tp.A.MustExec(t, "ip", "neigh", "replace", other.String(), "lladdr", mac.String(), "dev", "veth0", "nud", "permanent")
	bcast := netip.MustParseAddr("10.99.0.255")
	ours := []byte("ours")
	if err := tp.A.Do(func() error {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(tp.AddrA, 0)))
		if err != nil {
			return err
		}
		defer c.Close()
		rc, err := c.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1) })
		if serr != nil {
			return serr
		}
		for i := 0; i < 150; i++ {
			to := other
			if i >= 100 {
				to = bcast
			}
			if _, err := c.WriteToUDPAddrPort([]byte("not ours"), netip.AddrPortFrom(to, 23600)); err != nil {
				return err
			}
		}
		time.Sleep(50 * time.Millisecond) // let them arrive first
		_, err = c.WriteToUDPAddrPort(ours, netip.AddrPortFrom(tp.AddrB, 23600))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	in := make([]udp.Packet, 64)
	for i := range in {
		in[i].Buf = make([]byte, 9000)
	}
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	k, err := b.ReadBatch(in)
	if err != nil {
		t.Fatalf("ReadBatch: %v (stats %+v)", err, b.Stats())
	}
	if k != 1 || !bytes.Equal(in[0].Buf[:in[0].N], ours) {
		t.Fatalf("read %d datagrams, the first %q; want only %q (datagrams to another address or the broadcast were read)", k, in[0].Buf[:in[0].N], ours)
	}
	if st := b.Stats(); st.RxWrongDst != 0 {
		t.Fatalf("the reader saw %d datagrams to another destination: the XDP program must pass them to the kernel", st.RxWrongDst)
	}
}
