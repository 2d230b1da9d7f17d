package smarttd_test

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// BenchmarkShardsReport compares engine shards (issue 15) on one veth pair (MTU 9000): one
// daemon in A sending to 8 and to 64 daemons in B (BenchmarkDatapathReport's 8- and
// 64-connection rows: each peer its own sender of b.N/peers x 4 KiB in 1 MiB messages, 4
// outstanding), with shards: 1 and shards: 2 on the sender, interleaved within each round.
// Aggregate goodput, CPU seconds of the whole process (sender, receivers, clients) per GB
// and the share of the sender's data packets on shard 0 are reported (medians over
// rounds); with SHARDS_REPORT=FILE the markdown table of docs/datapath.md (min / median /
// max over rounds) is written to FILE. Run it with scripts/shards-report.
func BenchmarkShardsReport(b *testing.B) {
	rounds := envInt("SHARDS_ROUNDS", 3)
	steering := os.Getenv("SHARDS_STEERING")
	if steering == "" {
		steering = "cbpf"
	}
	tp := nstest.Pair(b)
	type cell struct{ agg, cpu, share0, handed []float64 }
	cells := map[[2]int]*cell{}
	peerSet, shardSet := []int{8, 64}, []int{1, 2}
	b.ResetTimer()
	for range rounds {
		for _, peers := range peerSet {
			for _, shards := range shardSet {
				r := runFairnessWith(b, tp, b.N, peers, func(c *smarttd.Config) {
					c.Shards = smarttd.Shards(shards)
					c.UDP.ShardSteering = steering
				})
				k := [2]int{peers, shards}
				if cells[k] == nil {
					cells[k] = &cell{}
				}
				x := cells[k]
				var data, handed uint64
				for _, s := range r.shards {
					data += s.Engine.DataSent
					handed += s.HandedOut
				}
				x.agg, x.cpu = append(x.agg, r.agg), append(x.cpu, r.cpuPerGB)
				x.share0 = append(x.share0, float64(r.shards[0].Engine.DataSent)/float64(max(data, 1)))
				x.handed = append(x.handed, float64(handed))
			}
		}
	}
	b.StopTimer()
	med := func(v []float64) float64 { return pct(v, 0.5) }
	for _, peers := range peerSet {
		for _, shards := range shardSet {
			x := cells[[2]int{peers, shards}]
			b.ReportMetric(med(x.agg), fmt.Sprintf("p%d_s%d_Gbit/s", peers, shards))
			b.ReportMetric(med(x.cpu), fmt.Sprintf("p%d_s%d_cpu_s/GB", peers, shards))
		}
	}
	out := os.Getenv("SHARDS_REPORT")
	if out == "" {
		return
	}
	mmm := func(v []float64, f string) string {
		s := slices.Clone(v)
		slices.Sort(s)
		return fmt.Sprintf(f+" / "+f+" / "+f, s[0], pct(s, 0.5), s[len(s)-1])
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d rounds of %d x 4 KiB (%.0f MB) per run, shard_steering %s, %s, GOMAXPROCS %d, %d CPUs.\n\n", rounds, b.N,
		float64(b.N)*benchPayload/1e6, steering, time.Now().UTC().Format("2006-01-02"), runtime.GOMAXPROCS(0), runtime.NumCPU())
	sb.WriteString("| connections | sender shards | aggregate Gbit/s min / median / max | vs 1 shard (median of per-round ratios) | CPU s per GB, whole process, min / median / max | sender's data packets on shard 0 (median) | datagrams handed between shards (median) |\n|---|---|---|---|---|---|---|\n")
	for _, peers := range peerSet {
		base := cells[[2]int{peers, 1}]
		for _, shards := range shardSet {
			x := cells[[2]int{peers, shards}]
			var ratios []float64
			for i := range x.agg {
				ratios = append(ratios, x.agg[i]/base.agg[i])
			}
			fmt.Fprintf(&sb, "| %d | %d | %s | %.2f | %s | %.0f %% | %.0f |\n", peers, shards, mmm(x.agg, "%.2f"), med(ratios),
				mmm(x.cpu, "%.2f"), 100*med(x.share0), med(x.handed))
		}
	}
	if err := os.WriteFile(out, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
}
