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

// BenchmarkShardsReport compares engine shards on one veth pair (MTU 9000): one
// daemon in A sending to 8 and to 64 daemons in B (BenchmarkDatapathReport's 8- and
// 64-connection rows: each peer its own sender of b.N/peers x 4 KiB in 1 MiB messages, 4
// outstanding), with shards: 1, shards: 2 and shards: 2 with shard_steering: hash (the
// kernel's 4-tuple hash: most datagrams reach the wrong shard and are handed over) on the
// sender, interleaved within each round.
// Aggregate goodput, CPU seconds of the whole process (sender, receivers, clients) per GB
// and the share of the sender's data packets on shard 0 are reported (medians over
// rounds); with SHARDS_REPORT=FILE the markdown table of docs/datapath.md (min / median /
// max over rounds) is written to FILE. Run it with scripts/shards-report.
func BenchmarkShardsReport(b *testing.B) {
	rounds := envInt("SHARDS_ROUNDS", 3)
	tp := nstest.Pair(b)
	type cell struct{ agg, cpu, share0, handed []float64 }
	type variant struct {
		shards   int
		steering string
	}
	type key struct {
		peers int
		v     variant
	}
	cells := map[key]*cell{}
	peerSet := []int{8, 64}
	variants := []variant{{1, "cbpf"}, {2, "cbpf"}, {2, "hash"}}
	b.ResetTimer()
	for round := range rounds {
		for _, peers := range peerSet {
			for _, v := range variants {
				b.Logf("round %d: %d peers, shards %d, steering %s", round, peers, v.shards, v.steering) // shown if it fails
				r := runFairnessWith(b, tp, b.N, peers, func(c *smarttd.Config) {
					c.Shards = smarttd.Shards(v.shards)
					c.UDP.ShardSteering = v.steering
				})
				k := key{peers, v}
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
		for _, v := range variants {
			x := cells[key{peers, v}]
			b.ReportMetric(med(x.agg), fmt.Sprintf("p%d_s%d_%s_Gbit/s", peers, v.shards, v.steering))
			b.ReportMetric(med(x.cpu), fmt.Sprintf("p%d_s%d_%s_cpu_s/GB", peers, v.shards, v.steering))
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
	fmt.Fprintf(&sb, "%d rounds of %d x 4 KiB (%.0f MB) per run, %s, GOMAXPROCS %d, %d CPUs.\n\n", rounds, b.N,
		float64(b.N)*benchPayload/1e6, time.Now().UTC().Format("2006-01-02"), runtime.GOMAXPROCS(0), runtime.NumCPU())
	sb.WriteString("| connections | sender shards | shard_steering | aggregate Gbit/s min / median / max | vs 1 shard (median of per-round ratios) | CPU s per GB, whole process, min / median / max | sender's data packets on shard 0 (median) | datagrams handed between shards (median) |\n|---|---|---|---|---|---|---|---|\n")
	for _, peers := range peerSet {
		base := cells[key{peers, variants[0]}]
		for _, v := range variants {
			x := cells[key{peers, v}]
			var ratios []float64
			for i := range x.agg {
				ratios = append(ratios, x.agg[i]/base.agg[i])
			}
			fmt.Fprintf(&sb, "| %d | %d | %s | %s | %.2f | %s | %.0f %% | %.0f |\n", peers, v.shards, v.steering, mmm(x.agg, "%.2f"), med(ratios),
				mmm(x.cpu, "%.2f"), 100*med(x.share0), med(x.handed))
		}
	}
	if err := os.WriteFile(out, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
}
