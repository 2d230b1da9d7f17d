package daemon

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// Gather makes each (destination, EV, kind) group adjacent, keeps the order within a group
// and orders groups by their first packet, without allocating.
func TestGather(t *testing.T) {
	dst := []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:1")}
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		n := 1 + rng.IntN(64)
		pk := make([]Packet, n)
		for i := range pk {
			pk[i] = Packet{N: i, Addr: dst[rng.IntN(2)], EV: uint16(rng.IntN(4)), Control: rng.IntN(8) == 0}
		}
		orig := append([]Packet(nil), pk...)
		Gather(pk)
		type key struct {
			a  netip.AddrPort
			ev uint16
			c  bool
		}
		k := func(p Packet) key { return key{p.Addr, p.EV, p.Control} }
		// Expected: groups in order of first appearance, members in order.
		var want []Packet
		done := map[key]bool{}
		for _, p := range orig {
			if done[k(p)] {
				continue
			}
			done[k(p)] = true
			for _, q := range orig {
				if k(q) == k(p) {
					want = append(want, q)
				}
			}
		}
		for i := range pk {
			if pk[i].N != want[i].N || k(pk[i]) != k(want[i]) {
				t.Fatalf("trial %d: position %d holds packet %d, want %d", trial, i, pk[i].N, want[i].N)
			}
		}
	}
	pk := make([]Packet, 64)
	for i := range pk {
		pk[i] = Packet{Addr: dst[i%2], EV: uint16(i % 3)}
	}
	if a := testing.AllocsPerRun(100, func() { Gather(pk) }); a != 0 {
		t.Fatalf("Gather allocates %.1f times", a)
	}
}

func BenchmarkGather(b *testing.B) {
	dst := []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:1"), netip.MustParseAddrPort("10.0.0.2:1")}
	pk := make([]Packet, 64)
	b.ReportAllocs()
	for b.Loop() {
		for i := range pk {
			pk[i] = Packet{Addr: dst[i%2], EV: uint16(i % 8)}
		}
		Gather(pk)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/64, "ns/pkt")
}
