//go:build unix

package sim

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
)

// BenchmarkScale runs the leaf-spine permutation at 1,024 hosts
// (leafspine_1024_permutation.yaml) and at 8,192 (leafspine_8192_permutation.yaml)
// alternately, one pair per iteration (the order swaps every round; -benchtime 3x gives
// three pairs, about a minute each), on one shard, and reports the packet-hops per wall
// second of each size (min, median, max) and the ratio of the two within each pair
// (1,024 over 8,192: the goal is at most 2). Only ratios taken side by side mean
// much on a shared machine. The scenarios' balancer is REPS (the daemon default).
func BenchmarkScale(b *testing.B) {
	sizes := []string{"1024", "8192"}
	hps := map[string][]float64{}
	var ratio []float64
	round := 0
	for b.Loop() {
		b.StopTimer()
		order := []int{0, 1}
		if round%2 == 1 {
			order = []int{1, 0}
		}
		var got [2]float64
		for _, k := range order {
			sc, err := LoadScenario(fmt.Sprintf("scenarios/leafspine_%s_permutation.yaml", sizes[k]))
			if err != nil {
				b.Fatal(err)
			}
			sc.Sim.Shards = 1
			s, err := New(sc)
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			t0 := time.Now()
			b.StartTimer()
			r := s.Run()
			b.StopTimer()
			w := time.Since(t0).Seconds()
			if r.Completed != sc.Topology.Hosts {
				b.Fatalf("%s hosts: %d flows completed", sizes[k], r.Completed)
			}
			got[k] = float64(r.Hops) / w
			hps[sizes[k]] = append(hps[sizes[k]], got[k])
		}
		ratio = append(ratio, got[0]/got[1])
		round++
		b.StartTimer()
	}
	med := median
	for _, n := range sizes {
		b.ReportMetric(slices.Min(hps[n])/1e6, "Mhops/s-"+n+"-min")
		b.ReportMetric(med(hps[n])/1e6, "Mhops/s-"+n+"-med")
		b.ReportMetric(slices.Max(hps[n])/1e6, "Mhops/s-"+n+"-max")
	}
	b.ReportMetric(slices.Min(ratio), "ratio-min")
	b.ReportMetric(med(ratio), "ratio-med")
	b.ReportMetric(slices.Max(ratio), "ratio-max")
}

// median returns the middle of v's values (the upper one of an even count).
func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}
