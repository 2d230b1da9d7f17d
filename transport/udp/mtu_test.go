package udp_test

import (
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/test/logsink"
	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/udp"
)

// mtuPair is two namespaces joined by one veth pair of MTU 1500 (IPv4 and IPv6).
func mtuPair(t *testing.T) (a, b *nstest.NS, pa, pb, pa6, pb6 netip.Prefix) {
	a, b = nstest.New(t, "mtu-a"), nstest.New(t, "mtu-b")
	pa, pb = netip.MustParsePrefix("10.97.0.1/24"), netip.MustParsePrefix("10.97.0.2/24")
	pa6, pb6 = netip.MustParsePrefix("fd97::1/64"), netip.MustParsePrefix("fd97::2/64")
	nstest.Connect(t, a, b, nstest.LinkOpts{MTU: 1500, A: pa, B: pb, A6: pa6, B6: pb6})
	return
}

// With DF (the default) a datagram over the link MTU is refused with an error that names
// the interface, its MTU and the fixes, and no IP fragment is created; with DisableDF the
// same datagrams leave as fragments (the control: the counter does move when it should).
func TestDFRefusesOversizeDatagrams(t *testing.T) {
	a, b, pa, pb, pa6, pb6 := mtuPair(t)
	for _, fam := range []struct {
		name     string
		src, dst netip.Addr
		frag     string
		need     string
	}{
		{"ipv4", pa.Addr(), pb.Addr(), "Ip.FragCreates", "2028-byte IP packets"},
		{"ipv6", pa6.Addr(), pb6.Addr(), "Ip6FragCreates", "2048-byte IP packets"},
	} {
		t.Run(fam.name, func(t *testing.T) {
			var log logsink.Sink
			rx := openIn(t, b, udp.Config{Listen: netip.AddrPortFrom(fam.dst, 0), EVS: 1})
			tx := openIn(t, a, udp.Config{Listen: netip.AddrPortFrom(fam.src, 0), EVS: 1, HeaderBytes: 96, MaxDatagram: 0,
				Logger: slog.New(slog.NewTextHandler(&log, nil))})
			if !tx.Caps().DF {
				t.Fatalf("caps %+v: want DF by default", tx.Caps())
			}
			before := a.SNMP(t)[fam.frag]
			pk := []udp.Packet{{Buf: make([]byte, 2000), N: 2000, Addr: rx.LocalAddr()}}
			k, err := tx.WriteBatch(pk)
			var me *udp.MTUError
			if k != 0 || !errors.Is(err, unix.EMSGSIZE) || !errors.As(err, &me) {
				t.Fatalf("WriteBatch of 2000 bytes over MTU 1500 with DF: %d, %v; want 0 and an *MTUError (EMSGSIZE)", k, err)
			}
			t.Logf("refused send: %v", err)
			if me.Interface != "veth0" || me.MTU != 1500 || me.Datagram != 2000 {
				t.Fatalf("MTUError %+v: want interface veth0, MTU 1500, datagram 2000", me)
			}
			for _, want := range []string{"interface veth0 has MTU 1500", fam.need, "ip link set dev veth0 mtu",
				"transport.mtu: "} {
				if !strings.Contains(err.Error(), want) || !strings.Contains(log.String(), want) {
					t.Errorf("error or log lacks %q:\nerr: %v\nlog: %s", want, err, log.String())
				}
			}
			if st := tx.Stats(); st.TxTooBig != 1 || st.TxPackets != 0 {
				t.Fatalf("stats %+v: want TxTooBig 1, TxPackets 0", st)
			}
			if after := a.SNMP(t)[fam.frag]; after != before {
				t.Fatalf("%s went from %d to %d with DF set", fam.frag, before, after)
			}
			// A datagram that fits still goes through.
			pk[0].N = 1400
			if k, err := tx.WriteBatch(pk); k != 1 || err != nil {
				t.Fatalf("WriteBatch of 1400 bytes: %d, %v", k, err)
			}
			in := []udp.Packet{{Buf: make([]byte, 4096)}}
			rx.SetReadDeadline(time.Now().Add(5 * time.Second))
			if k, err := rx.ReadBatch(in); k != 1 || err != nil || in[0].N != 1400 {
				t.Fatalf("ReadBatch: %d, %v, %d bytes; want the 1400-byte datagram (the 2000-byte one never left)", k, err, in[0].N)
			}

			// Control: without DF the kernel fragments, and the counter shows it.
			frag := openIn(t, a, udp.Config{Listen: netip.AddrPortFrom(fam.src, 0), EVS: 1, DisableDF: true})
			if frag.Caps().DF {
				t.Fatal("DisableDF: caps still say DF")
			}
			pk[0].N = 2000
			if k, err := frag.WriteBatch(pk); k != 1 || err != nil {
				t.Fatalf("WriteBatch without DF: %d, %v", k, err)
			}
			if after := a.SNMP(t)[fam.frag]; after < before+2 {
				t.Fatalf("%s went from %d to %d without DF: want at least 2 fragments", fam.frag, before, after)
			}
		})
	}
}

// Open compares MaxDatagram with the MTU of the interfaces the listen address uses.
func TestOpenChecksLinkMTU(t *testing.T) {
	a, _, pa, _, pa6, _ := mtuPair(t)
	open := func(listen netip.AddrPort, maxDgram int) (*udp.Conn, error) {
		var c *udp.Conn
		err := a.Do(func() error {
			var err error
			c, err = udp.Open(udp.Config{Listen: listen, EVS: 1, MaxDatagram: maxDgram, HeaderBytes: 96, Logger: slog.New(slog.NewTextHandler(new(logsink.Sink), nil))})
			return err
		})
		if c != nil {
			t.Cleanup(func() { c.Close() })
		}
		return c, err
	}
	for _, tc := range []struct {
		listen   string
		payload  string // the largest payload the error must suggest
		ipPacket string
	}{
		{pa.Addr().String() + ":0", "transport.mtu: 1376", "4188-byte IP packets"},
		{"0.0.0.0:0", "transport.mtu: 1376", "4188-byte IP packets"},
		{"[" + pa6.Addr().String() + "]:0", "transport.mtu: 1356", "4208-byte IP packets"},
		{"[::]:0", "transport.mtu: 1356", "4208-byte IP packets"},
	} {
		_, err := open(netip.MustParseAddrPort(tc.listen), 4160)
		var me *udp.MTUError
		if !errors.As(err, &me) || me.Interface != "veth0" || me.MTU != 1500 {
			t.Fatalf("listen %s, 4160-byte datagrams over MTU 1500: err %v, want an *MTUError naming veth0 and 1500", tc.listen, err)
		}
		t.Logf("listen %s: %v", tc.listen, err)
		for _, want := range []string{"interface veth0 has MTU 1500", tc.payload, tc.ipPacket, "ip link set dev veth0 mtu"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("listen %s: error lacks %q: %v", tc.listen, want, err)
			}
		}
		c, err := open(netip.MustParseAddrPort(tc.listen), 1400)
		if err != nil || c.Caps().LinkMTU != 1500 {
			t.Fatalf("listen %s, 1400-byte datagrams: %v (caps %+v), want open with LinkMTU 1500", tc.listen, err, c.Caps())
		}
	}
	// Loopback addresses are checked against lo (MTU 65536): any datagram fits.
	if _, err := open(netip.MustParseAddrPort("127.0.0.1:0"), 60000); err != nil {
		t.Fatalf("loopback: %v", err)
	}
	// With a second, jumbo link a wildcard listener opens, warns about the small one, and
	// reports the smallest MTU it saw.
	c := nstest.New(t, "mtu-c")
	nstest.Connect(t, a, c, nstest.LinkOpts{MTU: 9000, IfA: "jumbo0", IfB: "jumbo0",
		A: netip.MustParsePrefix("10.95.0.1/24"), B: netip.MustParsePrefix("10.95.0.2/24")})
	var log logsink.Sink
	var conn *udp.Conn
	if err := a.Do(func() error {
		var err error
		conn, err = udp.Open(udp.Config{Listen: netip.MustParseAddrPort("0.0.0.0:0"), EVS: 1, MaxDatagram: 4160, HeaderBytes: 96,
			Logger: slog.New(slog.NewTextHandler(&log, nil))})
		return err
	}); err != nil {
		t.Fatalf("wildcard listen with one jumbo link: %v", err)
	}
	defer conn.Close()
	if conn.Caps().LinkMTU != 1500 || !strings.Contains(log.String(), "some interfaces cannot carry full-size datagrams") ||
		!strings.Contains(log.String(), "interface veth0 has MTU 1500") || strings.Contains(log.String(), "jumbo0 has MTU") {
		t.Fatalf("caps %+v; want LinkMTU 1500 and a warning naming veth0 only; log:\n%s", conn.Caps(), log.String())
	}
}
