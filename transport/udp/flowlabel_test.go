package udp

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const ipv6Flowinfo = 11 // IPV6_FLOWINFO: report the flow label of received packets

// flowInfoSocket is a plain IPv6 socket that reports each datagram's flow label.
func flowInfoSocket(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rc, _ := c.SyscallConn()
	var serr error
	rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, ipv6Flowinfo, 1) })
	if serr != nil {
		t.Fatalf("IPV6_FLOWINFO: %v", serr)
	}
	return c
}

func TestFlowLabelCarrier(t *testing.T) {
	const evs = 8
	a := open(t, Config{Listen: netip.MustParseAddrPort("[::1]:0"), Carrier: CarrierFlowLabel, EVS: evs, DataDSCP: 10})
	// A second Conn in the same namespace shares the labels.
	open(t, Config{Listen: netip.MustParseAddrPort("[::1]:0"), Carrier: CarrierFlowLabel, EVS: evs})
	rx := flowInfoSocket(t)
	dst := rx.LocalAddr().(*net.UDPAddr).AddrPort()
	pk := make([]Packet, 3*evs)
	for i := range pk {
		pk[i] = Packet{Buf: []byte{byte(i)}, N: 1, Addr: dst, EV: uint16(i), ECN: ECT0}
	}
	if k, err := a.WriteBatch(pk); k != len(pk) || err != nil {
		t.Fatalf("WriteBatch: %d, %v", k, err)
	}
	if st := a.Stats(); st.TxBatches != 1 {
		t.Errorf("%d sendmmsg calls for %d EVs, want 1: one socket carries every label", st.TxBatches, evs)
	}
	rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf, oob := make([]byte, 16), make([]byte, 128)
	for range pk {
		n, oobn, _, from, err := rx.ReadMsgUDPAddrPort(buf, oob)
		if err != nil || n != 1 {
			t.Fatalf("read: %d, %v", n, err)
		}
		i := int(buf[0])
		var label uint32
		var tclass int = -1
		rest := oob[:oobn]
		for len(rest) > 0 {
			h, data, r, err := unix.ParseOneSocketControlMessage(rest)
			if err != nil {
				t.Fatal(err)
			}
			rest = r
			if h.Level == unix.IPPROTO_IPV6 && h.Type == ipv6Flowinfo {
				label = binary.BigEndian.Uint32(data) & 0xfffff
				tclass = int(binary.BigEndian.Uint32(data) >> 20 & 0xff)
			}
		}
		if want := uint32(i%evs) + 1; label != want || label != a.FlowLabel(uint16(i)) {
			t.Errorf("packet %d (EV %d): flow label %d, want %d", i, i, label, want)
		}
		if tclass != 10<<2|ECT0 {
			t.Errorf("packet %d: traffic class %#x, want DSCP 10 + ECT(0)", i, tclass)
		}
		if from.Port() != a.EVPort(uint16(i)) || a.EVPort(0) != a.EVPort(7) {
			t.Errorf("packet %d from port %d; want the single send port %d", i, from.Port(), a.EVPort(0))
		}
	}
	// IPv4 destinations cannot carry a label.
	if _, err := a.WriteBatch([]Packet{{Buf: []byte{1}, N: 1, Addr: netip.MustParseAddrPort("127.0.0.1:9")}}); err == nil || !strings.Contains(err.Error(), "flow label") {
		t.Errorf("IPv4 destination on the flowlabel carrier: %v", err)
	}
}

func TestFlowLabelConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Carrier: CarrierFlowLabel}, "needs an IPv6 Config.Listen"},
		{Config{Listen: netip.MustParseAddrPort("[::1]:0"), Carrier: CarrierFlowLabel, EVS: 5000}, "allowed range is 1..4096 for the flowlabel carrier"},
	} {
		tc.cfg.Logger = quiet()
		if _, err := Open(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
}
