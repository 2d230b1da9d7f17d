package train

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/sim"
)

// LongShort is the paper's long-short test (Fig. 10): Long flows run from the start; at
// Burst a burst of Short flows of ShortSize bytes each starts at once (each from its own
// host, within BurstJitter of Burst); all go to one receiver through one switch port. The
// run ends at End.
type LongShort struct {
	Long, Short int
	ShortSize   int64
	Burst, End  int64 // ns
}

// BurstJitter is how far after Burst (ns) a short flow may start: a packet time at
// 100 Gbit/s for 4 KiB is 0.33 us, so the burst still arrives at once.
const BurstJitter = 1_000

// LongShortStats is what the test measures.
type LongShortStats struct {
	LongBefore float64 // long flows' goodput / line rate over the 1 ms before the burst
	LongAfter  float64 // over [burst, end): the burst's share and the recovery
	ShortDone  int     // short flows completed by End
	MeanSlow   float64 // short flows: mean FCT / isolated FCT (docs/sim.md's ideal)
	MaxSlow    float64
	MeanFCTus  float64 // mean short-flow completion time, us
	Losses     uint64  // packets judged lost by any flow from the burst on
	// ReactUs is how long after the burst the long flows' goodput first fell below half
	// its rate before the burst (in 20 us bins; -1: it never did): the reaction time.
	ReactUs float64
	// RecoverUs is how long after the last short flow completed the long flows were back
	// at 90 % of their rate before the burst (-1: not by the end of the run).
	RecoverUs float64
}

// RunLongShort runs the long-short test with pol.
func (e Env) RunLongShort(pol Policy, ls LongShort, seed uint64) (LongShortStats, error) {
	var st LongShortStats
	if ls.Long < 1 || ls.Short < 1 || ls.Long+ls.Short > 4096 || ls.ShortSize < 1 || ls.Burst < 1_000_000 || ls.End <= ls.Burst {
		return st, fmt.Errorf("long-short: %d long, %d short (1..4096 in all), short size %d, burst at %d ns (>= 1 ms), end %d ns (> burst)",
			ls.Long, ls.Short, ls.ShortSize, ls.Burst, ls.End)
	}
	longSize := int64(float64(e.LinkRate) / 8 * float64(ls.End) / 1e9)
	var flows []sim.FlowSpec
	for i := range ls.Long {
		flows = append(flows, sim.FlowSpec{Src: 1 + i, Dst: 0, Size: sim.Size(longSize)})
	}
	// The seed draws each short flow's start within BurstJitter: with every start exactly
	// at Burst, a controller that draws no random numbers ran the same run for every seed.
	rng := rand.New(rand.NewPCG(seed, 0x6c6f6e67))
	for i := range ls.Short {
		start := ls.Burst + rng.Int64N(BurstJitter)
		flows = append(flows, sim.FlowSpec{Src: 1 + ls.Long + i, Dst: 0, Start: config.Duration(start), Size: sim.Size(ls.ShortSize)})
	}
	wl := sim.WorkloadConfig{Kind: "flows", Flows: flows}
	// Probes measure from 1 ms before the burst; their mark splits before and after.
	r, probes, _, err := e.simulate(pol, "rlcc-long-short", e.single(1+ls.Long+ls.Short), wl, longSize,
		int64(ls.Long)*longSize+int64(ls.Short)*ls.ShortSize, seed, ls.Burst-1_000_000, ls.Burst, ls.End, nil)
	if err != nil {
		return st, err
	}
	var before, after int64
	var bins []int64 // the long flows' acknowledged bytes per probeBin from the burst on
	for _, p := range probes {
		if p.host <= ls.Long {
			before += p.early
			after += p.bytes - p.early
			for i, b := range p.bins {
				for len(bins) <= i {
					bins = append(bins, 0)
				}
				bins[i] += b
			}
		}
		st.Losses += p.lateLoss
	}
	line := float64(e.LinkRate) / 8
	st.LongBefore = float64(before) / (line * 1e-3)
	st.LongAfter = float64(after) / (line * float64(ls.End-ls.Burst) / 1e9)
	var slows []float64
	lastDone := int64(-1)
	for _, f := range r.PerFlow {
		if f.Src > ls.Long && f.FCT >= 0 && !f.Failed {
			lastDone = max(lastDone, ls.Burst+f.FCT)
			st.ShortDone++
			slows = append(slows, float64(f.FCT)/float64(f.Ideal))
			st.MeanFCTus += float64(f.FCT) / 1e3
		}
	}
	st.ReactUs, st.RecoverUs = -1, -1
	pre := float64(before) * probeBin / 1e6 // bytes per bin before the burst (1 ms of them)
	for i, b := range bins {
		if float64(b) < pre/2 {
			st.ReactUs = float64((i+1)*probeBin) / 1e3
			break
		}
	}
	if lastDone >= 0 && st.ShortDone == ls.Short {
		for i := int((lastDone - ls.Burst) / probeBin); i >= 0 && i < len(bins); i++ {
			if float64(bins[i]) >= 0.9*pre {
				st.RecoverUs = float64(ls.Burst+int64(i+1)*probeBin-lastDone) / 1e3
				break
			}
		}
	}
	if len(slows) > 0 {
		for _, v := range slows {
			st.MeanSlow += v / float64(len(slows))
		}
		st.MaxSlow = slices.Max(slows)
		st.MeanFCTus /= float64(len(slows))
	}
	return st, nil
}
