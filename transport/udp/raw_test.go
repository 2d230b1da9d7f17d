//go:build linux

package udp

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

func TestRawCarrier(t *testing.T) {
	for _, lo := range []string{"127.0.0.1", "::1"} {
		t.Run(lo, func(t *testing.T) {
			addr := netip.MustParseAddr(lo)
			a := open(t, Config{Listen: netip.AddrPortFrom(addr, 19000), Carrier: CarrierRaw, EVPortBase: 20000, EVS: 40000,
				DataDSCP: 10, ControlDSCP: 46, TxTimestampEvery: 2})
			b := open(t, Config{Listen: netip.AddrPortFrom(addr, 0), EVS: 1})
			if got := a.EVPort(39999); got != 59999 {
				t.Fatalf("EVPort(39999) = %d, want 59999", got)
			}
			const n = 30
			pk := make([]Packet, n)
			for i := range pk {
				p := payload(i * 7)
				pk[i] = Packet{Buf: p, N: len(p), Addr: b.LocalAddr(), EV: uint16(i * 1333), ECN: ECT0, Control: i%3 == 0}
			}
			if k, err := a.WriteBatch(pk); k != n || err != nil {
				t.Fatalf("WriteBatch: %d, %v", k, err)
			}
			if st := a.Stats(); st.TxBatches != 1 {
				t.Errorf("%d sendmmsg calls for %d EVs, want 1", st.TxBatches, n)
			}
			for _, p := range readN(t, b, n, 512) {
				var j int
				for j = 0; j < n && string(payload(j*7)) != string(p.Buf[:p.N]); j++ {
				}
				if j == n {
					t.Fatalf("unexpected payload %q", p.Buf[:p.N])
				}
				wantDSCP := uint8(10)
				if j%3 == 0 {
					wantDSCP = 46
				}
				if p.Addr.Port() != 20000+uint16(j*1333%40000) || p.Addr.Addr() != addr || p.ECN != ECT0 || p.DSCP != wantDSCP {
					t.Errorf("packet %d: from %v ECN %d DSCP %d; want port %d, ECT(0), DSCP %d", j, p.Addr, p.ECN, p.DSCP, 20000+j*1333%40000, wantDSCP)
				}
			}
			// TX timestamps work through the raw socket too.
			var st [n]TxStamp
			got := 0
			for deadline := time.Now().Add(5 * time.Second); got < n/2 && time.Now().Before(deadline); {
				got += a.TxStamps(st[got:])
				time.Sleep(time.Millisecond)
			}
			if got != n/2 {
				t.Errorf("%d TX timestamps from the raw socket, want %d (stats %+v)", got, n/2, a.Stats())
			}
		})
	}
}

// The hand-patched header equals what gopacket serialises with lengths and checksums computed.
func TestRawHeaderMatchesGopacket(t *testing.T) {
	for _, tc := range []struct{ src, dst string }{{"10.1.2.3", "10.9.8.7"}, {"fd00::1", "fd00:1:2::77"}} {
		src, dst := netip.MustParseAddr(tc.src), netip.MustParseAddr(tc.dst)
		c := &Conn{v6: src.Is6(), cfg: Config{EVPortBase: 30000, EVS: 100}, raw: true}
		var err error
		if c.rawT, err = rawTemplate(src, 30000, true); err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{0, 1, 7, 1200, 4097} {
			pl := make([]byte, size)
			for i := range pl {
				pl[i] = byte(i*31 + size)
			}
			p := &Packet{Buf: pl, N: size, Addr: netip.AddrPortFrom(dst, 23600), EV: 42}
			hdr := c.rawHeader(make([]byte, rawHdrMax), p, dst, 0x2a<<2|ECT0)

			udp := &layers.UDP{SrcPort: 30042, DstPort: 23600}
			var ip gopacket.SerializableLayer
			if c.v6 {
				ip6 := &layers.IPv6{Version: 6, TrafficClass: 0x2a<<2 | ECT0, NextHeader: layers.IPProtocolUDP, HopLimit: 64, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
				udp.SetNetworkLayerForChecksum(ip6)
				ip = ip6
			} else {
				ip4 := &layers.IPv4{Version: 4, IHL: 5, TOS: 0x2a<<2 | ECT0, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolUDP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
				ip = ip4
			}
			buf := gopacket.NewSerializeBuffer()
			if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: c.v6}, ip, udp, gopacket.Payload(pl)); err != nil {
				t.Fatal(err)
			}
			want := buf.Bytes()[:len(hdr)]
			if !c.v6 {
				// The kernel fills in the IPv4 header checksum; gopacket left it 0 too.
				want[10], want[11] = 0, 0
			}
			if string(hdr) != string(want) {
				t.Errorf("%s size %d:\n got %x\nwant %x", tc.src, size, hdr, want)
			}
		}
	}
}

func TestRawConfigErrors(t *testing.T) {
	c := open(t, Config{Listen: netip.MustParseAddrPort("[::1]:19500"), Carrier: CarrierRaw, EVS: 4})
	if _, err := c.WriteBatch([]Packet{{Buf: []byte{1}, N: 1, Addr: netip.MustParseAddrPort("127.0.0.1:9")}}); err == nil || !strings.Contains(err.Error(), "IPv6 raw carrier") {
		t.Errorf("IPv4 destination on the IPv6 raw carrier: %v", err)
	}
	_, err := Open(Config{Listen: netip.MustParseAddrPort("0.0.0.0:0"), Carrier: CarrierRaw, Logger: quiet()})
	if err == nil || !strings.Contains(err.Error(), "needs a specific Config.Listen") {
		t.Fatalf("raw carrier on 0.0.0.0: %v", err)
	}
}

// The header template, written by hand, equals what gopacket serialises from the same
// fields, with and without Don't Fragment.
func TestRawTemplateMatchesGopacket(t *testing.T) {
	for _, s := range []string{"10.1.2.3", "::ffff:10.1.2.3", "fd00::1"} {
		src := netip.MustParseAddr(s)
		for _, df := range []bool{false, true} {
			got, err := rawTemplate(src, 30000, df)
			if err != nil {
				t.Fatal(err)
			}
			udp := &layers.UDP{SrcPort: 30000, DstPort: 9, Length: udpHdr}
			var ip gopacket.SerializableLayer = &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolUDP, HopLimit: 64,
				SrcIP: src.AsSlice(), DstIP: net.IPv6zero, Length: udpHdr}
			if src.Unmap().Is4() {
				var flags layers.IPv4Flag
				if df {
					flags = layers.IPv4DontFragment
				}
				ip = &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Flags: flags, Protocol: layers.IPProtocolUDP,
					SrcIP: src.Unmap().AsSlice(), DstIP: net.IPv4zero.To4(), Length: ipv4Hdr + udpHdr}
			}
			buf := gopacket.NewSerializeBuffer()
			if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, ip, udp); err != nil {
				t.Fatal(err)
			}
			if want := buf.Bytes(); string(got) != string(want) {
				t.Errorf("%s df=%v:\n got %x\nwant %x", s, df, got, want)
			}
		}
	}
	if _, err := rawTemplate(netip.Addr{}, 1, false); err == nil {
		t.Error("no source address: no error")
	}
}
