package switchport

import "math"

// BurstLoss is a flaky link's loss process: loss bursts of exponentially distributed
// length (mean burst) separated by exponentially distributed gaps (mean gap), from a
// seeded generator (splitmix64), so the simulator and the testbed's switches lose alike.
// The zero value loses nothing.
type BurstLoss struct {
	gap, burst int64
	rng        uint64
	good, loss int64 // the next (or current) burst is [good, loss)
}

// Start begins the process at time now (ns): the first burst follows a gap.
func (b *BurstLoss) Start(now, gap, burst int64, seed uint64) {
	b.gap, b.burst, b.rng = gap, burst, seed
	b.good = now + b.exp(gap)
	b.loss = b.good + b.exp(burst)
}

// Stop ends the process: nothing is lost any more.
func (b *BurstLoss) Stop() { *b = BurstLoss{} }

// Lost reports whether time t falls in a loss burst; t must not decrease between calls.
func (b *BurstLoss) Lost(t int64) bool {
	if b.burst == 0 {
		return false
	}
	for t >= b.loss {
		b.good = b.loss + b.exp(b.gap)
		b.loss = b.good + b.exp(b.burst)
	}
	return t >= b.good
}

// exp draws an exponential time with the given mean.
func (b *BurstLoss) exp(mean int64) int64 {
	b.rng += 0x9e3779b97f4a7c15
	z := b.rng
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	u := (float64(z>>11) + 0.5) / (1 << 53)
	return int64(-math.Log(u) * float64(mean))
}
