package udp

import (
	"bytes"
	"net/netip"
	"testing"
	"time"
)

// A GSO burst arrives as one GRO buffer: one system call, handed out across as many
// ReadBatch calls as the caller's slice needs, every datagram whole, in order, with the
// burst's timestamp.
func TestGROSplitsIntoCallerPackets(t *testing.T) {
	a := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 4, DataDSCP: 12})
	b := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, RecvBuffer: 8 << 20})
	if !b.Caps().GRO {
		t.Fatalf("caps %+v: want GRO on loopback", b.Caps())
	}
	out := writeBurst(t, a, b, 300)
	in := make([]Packet, 16)
	for i := range in {
		in[i].Buf = make([]byte, 2000)
	}
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got []Packet
	var calls []int
	for len(got) < 40 {
		k, err := b.ReadBatch(in)
		if err != nil {
			t.Fatalf("ReadBatch after %d: %v", len(got), err)
		}
		calls = append(calls, k)
		for _, p := range in[:k] {
			p.Buf = append([]byte(nil), p.Buf[:p.N]...)
			got = append(got, p)
		}
	}
	if len(calls) != 3 || calls[0] != 16 || calls[1] != 16 || calls[2] != 8 {
		t.Errorf("ReadBatch returned %v packets per call, want [16 16 8]", calls)
	}
	st := b.Stats()
	if st.RxBatches != 1 || st.RxGROBuffers != 1 || st.RxPackets != 40 || st.RxBytes != 39*1000+300 || st.RxDSCP[12] != 40 {
		t.Errorf("stats %+v: want one recvmmsg returning one GRO buffer of 40 datagrams", st)
	}
	for i, p := range got {
		if !bytes.Equal(p.Buf, out[i].Buf[:out[i].N]) || p.Addr.Port() != a.EVPort(3) || p.ECN != ECT0 || p.DSCP != 12 {
			t.Fatalf("packet %d: %d bytes from %v ECN %d DSCP %d", i, len(p.Buf), p.Addr, p.ECN, p.DSCP)
		}
		if p.RxTime != got[0].RxTime || !p.RxKernel && i > 0 {
			t.Errorf("packet %d: RxTime %d kernel %v, want the burst's %d", i, p.RxTime, p.RxKernel, got[0].RxTime)
		}
	}
}

// A caller buffer smaller than a datagram gets its head, and the count says so.
func TestGROTruncates(t *testing.T) {
	a := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1})
	b := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1})
	out := gsoPackets(b.LocalAddr(), []int{1000, 1000}, func(int) bool { return false })
	a.WriteBatch(out)
	got := readN(t, b, 2, 400)
	for i, p := range got {
		if p.N != 400 || !bytes.Equal(p.Buf[:400], out[i].Buf[:400]) {
			t.Errorf("packet %d: %d bytes", i, p.N)
		}
	}
	if st := b.Stats(); st.RxTruncated != 2 {
		t.Errorf("RxTruncated %d, want 2", st.RxTruncated)
	}
}

// With DisableGRO the same burst arrives as separate datagrams straight into the
// caller's buffers.
func TestGROOff(t *testing.T) {
	a := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1})
	b := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, DisableGRO: true})
	out := gsoPackets(b.LocalAddr(), []int{1000, 1000, 1000, 1000}, func(int) bool { return false })
	a.WriteBatch(out)
	readN(t, b, 4, 1000)
	if st := b.Stats(); b.Caps().GRO || st.RxGROBuffers != 0 || st.RxPackets != 4 || a.Stats().TxGSOMessages != 1 {
		t.Errorf("caps %+v stats %+v", b.Caps(), st)
	}
}

// With GROInPlace, ReadBatch points each Packet at its datagram in the socket's GRO
// buffer (not the caller's Buf, which stays untouched): every datagram whole, in order,
// larger than the caller's buffer too (nothing truncated), with no allocation.
func TestGROInPlace(t *testing.T) {
	a := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 4, DataDSCP: 12})
	b := open(t, Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), EVS: 1, RecvBuffer: 8 << 20, GROInPlace: true})
	out := writeBurst(t, a, b, 300)
	mine := make([]byte, 16*500) // smaller than a datagram: with a copy it would truncate
	in := make([]Packet, 16)
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got [][]byte
	for len(got) < 40 {
		for i := range in {
			in[i].Buf = mine[i*500 : (i+1)*500]
		}
		k, err := b.ReadBatch(in)
		if err != nil {
			t.Fatalf("ReadBatch after %d: %v", len(got), err)
		}
		for _, p := range in[:k] {
			if &p.Buf[0] == &mine[0] || p.N != len(p.Buf) {
				t.Fatalf("packet %d: Buf is the caller's, or N %d != len %d", len(got), p.N, len(p.Buf))
			}
			got = append(got, append([]byte(nil), p.Buf...))
		}
	}
	for i, p := range got {
		if !bytes.Equal(p, out[i].Buf[:out[i].N]) {
			t.Fatalf("packet %d: %d bytes, want %d (or different ones)", i, len(p), out[i].N)
		}
	}
	if !bytes.Equal(mine, make([]byte, len(mine))) {
		t.Fatal("the caller's buffers were written")
	}
	if st := b.Stats(); st.RxTruncated != 0 || st.RxPackets != 40 {
		t.Fatalf("stats %+v", st)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if k, err := a.WriteBatch(out); k != 40 || err != nil {
			t.Fatalf("WriteBatch: %d, %v", k, err)
		}
		for n := 0; n < 40; {
			for i := range in {
				in[i].Buf = mine[i*500 : (i+1)*500]
			}
			k, err := b.ReadBatch(in)
			if err != nil {
				t.Fatal(err)
			}
			n += k
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per burst, want 0", allocs)
	}
}
