package sim

import (
	"math"
	"slices"
	"testing"
)

// traceSizes builds kind's flows on a 16-host fabric (not run) and returns their sizes.
func traceSizes(t *testing.T, kind string, load float64) []int64 {
	t.Helper()
	topo := TopologyConfig{Kind: "fattree2", Hosts: 16, Radix: 8, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 500}
	s, err := New(scenario(topo, WorkloadConfig{Kind: kind, Load: load, Duration: 20_000_000, MaxFlows: 100000}))
	if err != nil {
		t.Fatal(err)
	}
	sizes := make([]int64, len(s.flows))
	for i := range s.flows {
		sizes[i] = s.flows[i].size
	}
	slices.Sort(sizes)
	return sizes
}

// The Facebook Hadoop trace draws its CDF: 60 % of the flows at most 1 KB, a mean near
// the CDF's 120 KB, none above 10 MB; its arrivals offer the load asked for; web search
// keeps its own, larger, sizes.
func TestFacebookHadoopTrace(t *testing.T) {
	sizes := traceSizes(t, "facebook_hadoop", 0.5)
	n := len(sizes)
	if n < 5000 {
		t.Fatalf("%d flows, want thousands", n)
	}
	if p := sizes[n*55/100]; p > 1000 {
		t.Errorf("55th percentile %d B, want <= 1000 (the CDF: 60 %% at most 1 KB)", p)
	}
	if p := sizes[n*65/100]; p <= 1000 {
		t.Errorf("65th percentile %d B, want > 1000", p)
	}
	if sizes[n-1] > 10_000_000 {
		t.Errorf("largest flow %d B, beyond the CDF's 10 MB", sizes[n-1])
	}
	sum := int64(0)
	for _, v := range sizes {
		sum += v
	}
	// Offered bytes: 16 hosts x 0.5 x 100 Gbit/s x 20 ms = 2 GB; the mean is heavy-tailed,
	// so both are allowed 25 %.
	if mean := float64(sum) / float64(n); math.Abs(mean-120420) > 0.25*120420 {
		t.Errorf("mean flow %.0f B, want about 120420", mean)
	}
	if want := 16 * 0.5 * 100e9 / 8 * 0.02; math.Abs(float64(sum)-want) > 0.25*want {
		t.Errorf("offered %d B, want about %.0f", sum, want)
	}
	if ws := traceSizes(t, "websearch", 0.5); ws[len(ws)/2] < 50_000 {
		t.Errorf("websearch median %d B: its CDF puts 60 %% above 50 KB", ws[len(ws)/2])
	}
}
