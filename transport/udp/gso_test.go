package udp

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
)

// writeBurst writes a to b 40 datagrams in one WriteBatch, 1000 bytes each but the last
// of last bytes, and returns them.
func writeBurst(t *testing.T, a, b *Conn, last int) []Packet {
	t.Helper()
	sizes := make([]int, 40)
	for i := range sizes {
		sizes[i] = 1000
	}
	sizes[39] = last
	pk := gsoPackets(b.LocalAddr(), sizes, func(int) bool { return false })
	if k, err := a.WriteBatch(pk); k != 40 || err != nil {
		t.Fatalf("WriteBatch: %d, %v", k, err)
	}
	return pk
}

// gsoPackets: same EV and destination; sizes and classes vary as given.
func gsoPackets(dst netip.AddrPort, sizes []int, control func(i int) bool) []Packet {
	pk := make([]Packet, len(sizes))
	for i, n := range sizes {
		buf := bytes.Repeat([]byte{byte(i)}, n)
		copy(buf, fmt.Sprintf("%04d", i))
		pk[i] = Packet{Buf: buf, N: n, Addr: dst, EV: 3, ECN: ECT0, Control: control(i)}
	}
	return pk
}

// checkInOrder reads len(want) packets and checks payload, order and class of each.
func checkInOrder(t *testing.T, b *Conn, want []Packet, dscp func(i int) uint8) {
	t.Helper()
	got := readN(t, b, len(want), 70000)
	for i, p := range got {
		w := want[i]
		if !bytes.Equal(p.Buf[:p.N], w.Buf[:w.N]) {
			t.Fatalf("packet %d: %d bytes %q..., want %d bytes %q...", i, p.N, p.Buf[:min(4, p.N)], w.N, w.Buf[:4])
		}
		if p.DSCP != dscp(i) || p.ECN != w.ECN {
			t.Errorf("packet %d: DSCP %d ECN %d, want DSCP %d", i, p.DSCP, p.ECN, dscp(i))
		}
	}
}

func TestGSOOneMessage(t *testing.T) {
	a := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 4, DataDSCP: 10})
	b := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, RecvBuffer: 8 << 20})
	if !a.Caps().GSO {
		t.Fatalf("caps %+v: want GSO on loopback", a.Caps())
	}
	pk := writeBurst(t, a, b, 500) // the last segment may be short
	st := a.Stats()
	if st.TxBatches != 1 || st.TxGSOMessages != 1 || st.TxGSOSegments != 40 || st.TxPackets != 40 || st.TxBytes != 39*1000+500 {
		t.Fatalf("stats %+v: want one sendmmsg with one 40-segment GSO message", st)
	}
	checkInOrder(t, b, pk, func(int) uint8 { return 10 })
}

// Messages split where the class, the size or the segment limits say so, and every
// packet still arrives whole, in order, with its own DSCP.
func TestGSOSplits(t *testing.T) {
	a := open(t, Config{Listen: netip.MustParseAddrPort("[::1]:0"), EVS: 4, DataDSCP: 10, ControlDSCP: 46, TxTimestampEvery: 7})
	b := open(t, Config{Listen: netip.MustParseAddrPort("[::1]:0"), EVS: 1, RecvBuffer: 8 << 20})
	var sizes []int
	for i := 0; i < 64; i++ {
		switch {
		case i < 20:
			sizes = append(sizes, 4096) // 15 fit in 65000 bytes
		case i < 30:
			sizes = append(sizes, 1000+i) // growing: each starts a message
		default:
			sizes = append(sizes, 600)
		}
	}
	control := func(i int) bool { return i >= 40 && i%5 == 0 }
	pk := gsoPackets(b.LocalAddr(), sizes, control)
	if k, err := a.WriteBatch(pk); k != len(pk) || err != nil {
		t.Fatalf("WriteBatch: %d, %v", k, err)
	}
	st := a.Stats()
	if st.TxGSOMessages < 3 || st.TxGSOSegments > 64 || st.TxPackets != 64 {
		t.Errorf("stats %+v", st)
	}
	checkInOrder(t, b, pk, func(i int) uint8 {
		if control(i) {
			return 46
		}
		return 10
	})
	if st.TxStampsSampled != 64/7 {
		t.Errorf("%d TX samples, want %d: GSO must not skip sampling", st.TxStampsSampled, 64/7)
	}
}

func TestGSOOff(t *testing.T) {
	a := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, DisableGSO: true})
	b := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1})
	pk := gsoPackets(b.LocalAddr(), []int{100, 100, 100}, func(int) bool { return false })
	if k, err := a.WriteBatch(pk); k != 3 || err != nil || a.Caps().GSO || a.Stats().TxGSOMessages != 0 {
		t.Fatalf("WriteBatch %d %v caps %+v stats %+v: want no GSO", k, err, a.Caps(), a.Stats())
	}
	readN(t, b, 3, 200)
}
