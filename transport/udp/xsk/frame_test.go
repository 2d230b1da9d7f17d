//go:build linux

package xsk

import (
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

var testHop = Hop{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
	Src: netip.MustParseAddr("10.99.0.1"), Dst: netip.MustParseAddr("10.99.0.2")}

// PutUDP4's headers decode in gopacket with a valid IP checksum and the fields we set,
// and ParseUDP4 reads them back.
func TestPutUDP4(t *testing.T) {
	f := make([]byte, HeaderLen+300)
	for i := range f[HeaderLen:] {
		f[HeaderLen+i] = byte(i)
	}
	if n := PutUDP4(f, &testHop, 30007, 23600, 0x2a<<2|2, 300); n != HeaderLen {
		t.Fatalf("PutUDP4 = %d", n)
	}
	pk := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
	ip, _ := pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	u, _ := pk.Layer(layers.LayerTypeUDP).(*layers.UDP)
	if ip == nil || u == nil {
		t.Fatalf("gopacket: %v", pk)
	}
	want := ip.Checksum
	ip.Checksum = 0
	buf := gopacket.NewSerializeBuffer()
	if err := ip.SerializeTo(buf, gopacket.SerializeOptions{ComputeChecksums: true}); err != nil {
		t.Fatal(err)
	}
	again := gopacket.NewPacket(buf.Bytes(), layers.LayerTypeIPv4, gopacket.Default).Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if again.Checksum != want || ip.TOS != 0x2a<<2|2 || ip.Flags != layers.IPv4DontFragment || ip.TTL != 64 || ip.Length != 328 ||
		u.SrcPort != 30007 || u.DstPort != 23600 || u.Length != 308 || len(u.Payload) != 300 {
		t.Fatalf("ip %+v (checksum %#x, want %#x) udp %+v", ip, again.Checksum, want, u)
	}
	d, why := ParseUDP4(f)
	if why != OK || d.Src != netip.MustParseAddrPort("10.99.0.1:30007") || d.Dst != netip.MustParseAddrPort("10.99.0.2:23600") ||
		d.TOS != 0x2a<<2|2 || len(d.Payload) != 300 || d.Payload[299] != byte(299%256) {
		t.Fatalf("ParseUDP4: %+v, %v", d, why)
	}
}

// ParseUDP4 never panics on arbitrary bytes and whatever it accepts lies inside the frame
// with a valid IP checksum.
func FuzzParseUDP4(f *testing.F) {
	g := make([]byte, HeaderLen+10)
	PutUDP4(g, &testHop, 1, 2, 0, 10)
	f.Add(g)
	f.Add(g[:HeaderLen-1])
	f.Fuzz(func(t *testing.T, b []byte) {
		d, why := ParseUDP4(b)
		if why != OK {
			return
		}
		ihl := int(b[14]&0xf) * 4
		if ipChecksum(b[14:14+ihl]) != 0 || len(d.Payload) > len(b)-HeaderLen {
			t.Fatalf("accepted a bad frame: %x", b)
		}
	})
}
