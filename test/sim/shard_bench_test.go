//go:build unix

package sim

import (
	"fmt"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
)

// cpuSeconds is the process's user and system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// BenchmarkShards runs the SMaRTT permutation scenario (smartt_1024_permutation.yaml;
// 128 hosts: its first two pods) on one shard and on two, alternately (the order swaps
// every round), one round per iteration: -benchtime 5x gives five pairs. On a shared
// machine only ratios taken side by side mean much, so it reports the speed-up of each
// pair (wall time of one shard over two; min, median, max), the median packet-hops per
// second of each, and the process's CPU seconds per wall second of each (2 when both
// cores are the two-shard run's). Because other work on the machine stretches wall time
// (a barrier waits for the half whose thread was preempted), it also reports the
// speed-up in thread CPU time: the one-shard run's CPU time over the two-shard run's
// critical path (the sum over windows of the longer half's thread CPU time), what two
// dedicated cores would give. Every pair must give the same result hash.
func BenchmarkShards(b *testing.B) {
	for _, hosts := range []int{128, 1024} {
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			var speedup, cpuSpeedup, hps1, hps2, util2, util1 []float64
			round := 0
			for b.Loop() {
				b.StopTimer()
				var wall, work [3]float64
				var hash [3]string
				order := []int{1, 2}
				if round%2 == 1 {
					order = []int{2, 1}
				}
				for _, n := range order {
					sc, err := LoadScenario("scenarios/smartt_1024_permutation.yaml")
					if err != nil {
						b.Fatal(err)
					}
					sc.Topology.Hosts = hosts
					sc.Sim.Shards = n
					s, err := New(sc)
					if err != nil {
						b.Fatal(err)
					}
					runtime.GC()
					c0, t0 := cpuSeconds(), time.Now()
					b.StartTimer()
					r := s.Run()
					b.StopTimer()
					w, c := time.Since(t0).Seconds(), cpuSeconds()-c0
					if r.Completed != hosts {
						b.Fatalf("%d shards: %d of %d flows completed", n, r.Completed, hosts)
					}
					wall[n], hash[n] = w, r.Hash()
					st := s.ShardStats()
					if st.Parts != 2 {
						b.Fatalf("%d hosts: not split", hosts)
					}
					work[n] = st.CPU[0] + st.CPU[1] // one shard: its thread's CPU time
					if n == 2 {
						work[n] = st.Critical // two: the longer half, window by window
					}
					if n == 1 {
						hps1, util1 = append(hps1, float64(r.Hops)/w), append(util1, c/w)
					} else {
						hps2, util2 = append(hps2, float64(r.Hops)/w), append(util2, c/w)
					}
				}
				if hash[1] != hash[2] {
					b.Fatalf("result hashes differ: 1 shard %s, 2 shards %s", hash[1][:16], hash[2][:16])
				}
				speedup = append(speedup, wall[1]/wall[2])
				cpuSpeedup = append(cpuSpeedup, work[1]/work[2])
				round++
				b.StartTimer()
			}
			med := median
			b.ReportMetric(slices.Min(speedup), "speedup-min")
			b.ReportMetric(med(speedup), "speedup-med")
			b.ReportMetric(slices.Max(speedup), "speedup-max")
			b.ReportMetric(slices.Min(cpuSpeedup), "cpu-speedup-min")
			b.ReportMetric(med(cpuSpeedup), "cpu-speedup-med")
			b.ReportMetric(slices.Max(cpuSpeedup), "cpu-speedup-max")
			b.ReportMetric(med(hps1)/1e6, "Mhops/s-1shard")
			b.ReportMetric(med(hps2)/1e6, "Mhops/s-2shards")
			b.ReportMetric(med(util1), "cpu/wall-1shard")
			b.ReportMetric(med(util2), "cpu/wall-2shards")
		})
	}
}
