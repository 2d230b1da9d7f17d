package udp

import (
	"net/netip"
	"testing"
)

// pingPong sends len(out) packets and reads them all back on loopback.
func pingPong(t testing.TB, a, b *Conn, out, in []Packet, stamps []TxStamp) {
	if k, err := a.WriteBatch(out); k != len(out) || err != nil {
		t.Fatalf("WriteBatch: %d, %v", k, err)
	}
	for got := 0; got < len(out); {
		k, err := b.ReadBatch(in)
		if err != nil {
			t.Fatalf("ReadBatch: %v", err)
		}
		got += k
	}
	a.TxStamps(stamps)
}

func loopPair(t testing.TB, size int) (a, b *Conn, out, in []Packet, stamps []TxStamp) {
	a = open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 8, TxTimestampEvery: 4, DataDSCP: 10})
	b = open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, RecvBuffer: 8 << 20})
	buf := make([]byte, size)
	out = make([]Packet, 64)
	for i := range out {
		out[i] = Packet{Buf: buf, N: size, Addr: b.LocalAddr(), EV: uint16(i / 8), ECN: ECT0, Control: i%7 == 0}
	}
	in = make([]Packet, 64)
	for i := range in {
		in[i].Buf = make([]byte, size)
	}
	return a, b, out, in, make([]TxStamp, 64)
}

// The read and write paths (with ECN, DSCP, kernel RX timestamps and sampled TX
// timestamps all on) allocate nothing.
func TestZeroAllocs(t *testing.T) {
	a, b, out, in, stamps := loopPair(t, 1200)
	pingPong(t, a, b, out, in, stamps) // warm up
	if n := testing.AllocsPerRun(50, func() { pingPong(t, a, b, out, in, stamps) }); n != 0 {
		t.Fatalf("%.1f allocations per 64-packet round trip, want 0", n)
	}
	if st := a.Stats(); st.TxStampsMatched == 0 {
		t.Fatalf("no TX timestamps matched during the run: %+v", st)
	}
}

// BenchmarkLoopback is one 4096-byte packet written and read per op, in batches of 64.
func BenchmarkLoopback(b *testing.B) {
	a, c, out, in, stamps := loopPair(b, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	b.SetBytes(4096)
	for i := 0; i < b.N; i += len(out) {
		pingPong(b, a, c, out, in, stamps)
	}
}
