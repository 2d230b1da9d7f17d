package sim

import "testing"

// workload.interleave lays a ring all-reduce's ranks over the leaves in turn, so every
// hop of the ring crosses the spine; 0 keeps rank r on host r (most hops within a leaf);
// a count that does not divide the participants is refused.
func TestRingInterleave(t *testing.T) {
	topo := TopologyConfig{Kind: "leafspine", Hosts: 16, Leaves: 2, Spines: 2, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 500}
	cross := func(l int) (crossing, total int) {
		s, err := New(scenario(topo, WorkloadConfig{Kind: "ring_allreduce", Size: 1 << 20, Interleave: l}))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range s.flows {
			total++
			if f.src/8 != f.dst/8 {
				crossing++
			}
		}
		return crossing, total
	}
	if c, n := cross(2); n != 16*2*15 || c != n {
		t.Errorf("interleave 2: %d of %d flows cross leaves, want all %d", c, n, 16*2*15)
	}
	if c, n := cross(0); c != 2*15*2 {
		t.Errorf("interleave 0: %d of %d flows cross leaves, want the 2 ring hops per step", c, n)
	}
	for _, l := range []int{-1, 3, 17} {
		if _, err := New(scenario(topo, WorkloadConfig{Kind: "ring_allreduce", Size: 1 << 20, Interleave: l})); err == nil {
			t.Errorf("interleave %d accepted", l)
		}
	}
	h, err := rankHosts(4, 16)
	if err != nil || h[0] != 0 || h[1] != 4 || h[4] != 1 || h[15] != 15 {
		t.Errorf("rankHosts(4, 16) = %v, %v", h, err)
	}
}
