package udp

import (
	"fmt"
	"net/netip"
	"testing"
)

// splitPayload makes packet i's datagram Buf[:hdr] then Payload (the rest of its bytes,
// in a buffer of their own), as the daemon sends a data packet: header, then the
// message's bytes where they are. Packets shorter than hdr keep everything in Buf.
func splitPayload(pk []Packet, hdr int) []Packet {
	out := make([]Packet, len(pk))
	for i, p := range pk {
		out[i] = p
		if p.N > hdr {
			out[i].Buf = append([]byte(nil), p.Buf[:hdr]...)
			out[i].N = hdr
			out[i].Payload = append([]byte(nil), p.Buf[hdr:p.N]...)
		}
	}
	return out
}

// Header and payload as two iovecs arrive as one datagram each, byte for byte, also when
// GSO joins them into one message ([h1 p1 h2 p2 ...] cut at the segment size), with a
// short last segment, and mixed with packets that have no Payload.
func TestWriteBatchPayload(t *testing.T) {
	for _, gso := range []bool{true, false} {
		t.Run(fmt.Sprintf("gso=%v", gso), func(t *testing.T) {
			a := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 4, DataDSCP: 10, DisableGSO: !gso})
			b := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, RecvBuffer: 8 << 20})
			if !a.GathersPayload() {
				t.Fatal("GathersPayload false on the port carrier")
			}
			sizes := make([]int, 40)
			for i := range sizes {
				sizes[i] = 1064
			}
			sizes[17] = 40 // shorter than the header: no Payload, ends that GSO message
			sizes[39] = 564
			want := gsoPackets(b.LocalAddr(), sizes, func(int) bool { return false })
			pk := splitPayload(want, 64)
			if k, err := a.WriteBatch(pk); k != len(pk) || err != nil {
				t.Fatalf("WriteBatch: %d, %v", k, err)
			}
			st := a.Stats()
			if st.TxPackets != 40 || st.TxBytes != 38*1064+40+564 {
				t.Fatalf("stats %+v: want 40 packets of the datagrams' lengths", st)
			}
			if gso && st.TxGSOSegments < 30 {
				t.Fatalf("stats %+v: want the packets joined by GSO", st)
			}
			checkInOrder(t, b, want, func(int) uint8 { return 10 })
		})
	}
}

// The raw carrier builds its own header and checksum over Buf: it refuses a Payload.
func TestWriteBatchPayloadRawRefused(t *testing.T) {
	c := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:19600"), Carrier: CarrierRaw, EVS: 4})
	if c.GathersPayload() {
		t.Fatal("GathersPayload true on the raw carrier")
	}
	p := []Packet{{Buf: make([]byte, 64), N: 64, Payload: make([]byte, 100), Addr: netip.MustParseAddrPort("127.0.0.1:19601")}}
	if k, err := c.WriteBatch(p); k != 0 || err == nil {
		t.Fatalf("WriteBatch with a Payload on the raw carrier: %d, %v; want refused", k, err)
	}
}

// Sending header and payload as two iovecs allocates nothing either.
func TestZeroAllocsPayload(t *testing.T) {
	a, b, out, in, stamps := loopPair(t, 1200)
	payload := make([]byte, 1100)
	for i := range out {
		out[i].N, out[i].Payload = 100, payload
	}
	pingPong(t, a, b, out, in, stamps)
	if n := testing.AllocsPerRun(50, func() { pingPong(t, a, b, out, in, stamps) }); n != 0 {
		t.Fatalf("%.1f allocations per 64-packet round trip, want 0", n)
	}
	if in[0].N != 1200 {
		t.Fatalf("received %d bytes, want 1200", in[0].N)
	}
}
