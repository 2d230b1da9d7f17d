package ballsbins

import (
	"math/rand/v2"
	"slices"
)

// Imbalance throws balls uniformly and independently at random into bins (App. B: every
// active flow hashes each of its EVs onto one of a switch's output ports) and returns the
// load imbalance, the most loaded bin's excess over the mean: max/(balls/bins) - 1.
func Imbalance(rng *rand.Rand, balls, bins int, load []int) float64 {
	load = load[:bins]
	clear(load)
	for range balls {
		load[rng.IntN(bins)]++
	}
	return float64(slices.Max(load))*float64(bins)/float64(balls) - 1
}

// ImbalanceSample returns trials load imbalances of flows x evs balls into bins, sorted.
func ImbalanceSample(seed uint64, flows, evs, bins, trials int) []float64 {
	rng := rand.New(rand.NewPCG(seed, 0xe75))
	load := make([]int, bins)
	out := make([]float64, trials)
	for i := range out {
		out[i] = Imbalance(rng, flows*evs, bins, load)
	}
	slices.Sort(out)
	return out
}

// Quantile returns the q-quantile (0..1) of sorted values, by the nearest rank.
func Quantile(sorted []float64, q float64) float64 {
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
