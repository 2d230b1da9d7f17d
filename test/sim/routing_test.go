package sim

import (
	"strings"
	"testing"
)

// TestSwitchRouting: with every host on one EV (lb ecmp), switch-side spraying and
// adaptive routing undo ECMP's hash collisions on a permutation (the AI-training study's
// in-switch balancers), without the hosts choosing paths; and a routing name the
// simulator does not know is refused, naming the field.
func TestSwitchRouting(t *testing.T) {
	topo := TopologyConfig{Kind: "fattree2", Hosts: 64, Radix: 16, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 500}
	res := map[string]*Result{}
	for _, routing := range []string{"ecmp", "spray", "round_robin", "adaptive", "adaptive_random"} {
		topo.Routing = routing
		res[routing] = permutation64(t, topo, "ecmp")
	}
	if s := res["ecmp"].FCT.MaxSlowdown; s < 1.5 {
		t.Fatalf("ECMP max slowdown %.2f: expected hash collisions to at least 1.5x", s)
	}
	for _, routing := range []string{"spray", "round_robin", "adaptive", "adaptive_random"} {
		if res[routing].Ratio > 0.8*res["ecmp"].Ratio {
			t.Errorf("routing %s: completion %.2f of ideal, not well below ECMP's %.2f", routing, res[routing].Ratio, res["ecmp"].Ratio)
		}
	}
	if s := res["spray"].FCT.MaxSlowdown; s > 1.3 {
		t.Errorf("random switch spraying: max slowdown %.2f, expected near ideal", s)
	}
	topo.Routing = "flowlet"
	_, err := New(scenario(topo, WorkloadConfig{Kind: "permutation", Size: 1 << 20}))
	if err == nil || !strings.Contains(err.Error(), "topology.routing") {
		t.Fatalf("routing flowlet: err %v, want one naming topology.routing", err)
	}
}

// TestSwitchRoutingAvoidsFailedLink: spraying and adaptive switches use only the up ports
// routing allows after a failure, so every flow completes and nothing is sent into the
// dead link once routing has converged.
func TestSwitchRoutingAvoidsFailedLink(t *testing.T) {
	for _, routing := range []string{"spray", "round_robin", "adaptive", "adaptive_random"} {
		topo := TopologyConfig{Kind: "fattree2", Hosts: 32, Radix: 8, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 500, Routing: routing}
		sc := scenario(topo, WorkloadConfig{Kind: "permutation", Size: 512 << 10})
		sc.Transport.MaxRetransmits = 255
		sc.Transport.LB = "ecmp"
		sc.Failures = []FailureConfig{{Kind: "down", A: "tor0", B: "spine0", At: 0}}
		r := run(t, sc)
		if r.Completed != 32 || r.Failed != 0 {
			t.Fatalf("routing %s: %d completed, %d failed", routing, r.Completed, r.Failed)
		}
		if r.LinkDrops != 0 {
			t.Errorf("routing %s: %d packets sent into the link that was down from the start", routing, r.LinkDrops)
		}
	}
}
