package smarttd

import "sync/atomic"

// DelayBuckets is the number of finite buckets of a DelayHist.
const DelayBuckets = 10

// DelayBound is the upper bound of DelayHist bucket i (0 <= i < DelayBuckets), ns:
// 1 us times 4^i, 1 us to 262 ms.
func DelayBound(i int) int64 { return 1000 << (2 * i) }

// DelayHist is a histogram of delays that one goroutine observes and any reads (the
// send-path delay of sampled packets: kernel TX timestamp minus user-space send time).
type DelayHist struct {
	counts [DelayBuckets + 1]atomic.Uint64 // the last: above every bound
	sumNs  atomic.Uint64
}

// Observe counts a delay of ns (>= 0) in the first bucket whose bound it does not exceed.
func (h *DelayHist) Observe(ns int64) {
	i := 0
	for i < DelayBuckets && ns > DelayBound(i) {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(uint64(ns))
}

// Snapshot returns the count of each bucket (not cumulative; the last is above every
// bound) and the sum of the delays in ns.
func (h *DelayHist) Snapshot() (counts [DelayBuckets + 1]uint64, sumNs uint64) {
	for i := range counts {
		counts[i] = h.counts[i].Load()
	}
	return counts, h.sumNs.Load()
}
