package sim

import (
	"math/bits"

	"github.com/smartt-transport/smartt/cc"
)

// RTTSummary is the distribution of the RTT samples every sender's congestion controller
// was given (one per ACK that acknowledged new data, cc.Ack.RTT), over the whole run and
// every host: the SMaRTT paper's Fig. 6b and the REPS paper's Fig. 15 plot it. The
// percentiles come from a log-linear histogram, so each is within 1/64 (1.6 %) of the
// sample it stands for.
type RTTSummary struct {
	Samples uint64 `json:"samples"` // ACKs sampled
	P50     int64  `json:"p50_ns"`  // median RTT
	P90     int64  `json:"p90_ns"`  // 90th percentile
	P99     int64  `json:"p99_ns"`  // 99th percentile
	Max     int64  `json:"max_ns"`  // largest sample (exact)
}

// rttSub is the histogram's buckets per power of two (its resolution: 1/rttSub).
const (
	rttSubBits = 6
	rttSub     = 1 << rttSubBits
)

// rttHist counts RTT samples in log-linear buckets: values below rttSub ns exactly, above
// that rttSub buckets per power of two. It allocates once, at its first sample.
type rttHist struct {
	counts []uint64
	n      uint64
	max    int64
}

// rttBucket returns v's bucket (v >= 0).
func rttBucket(v uint64) int {
	if v < rttSub {
		return int(v)
	}
	e := bits.Len64(v) - 1 - rttSubBits // v >> e lies in [rttSub, 2*rttSub)
	return (e+1)*rttSub + int(v>>e) - rttSub
}

// rttLow returns the smallest value of bucket i, the value a percentile in it reports.
func rttLow(i int) int64 {
	if i < rttSub {
		return int64(i)
	}
	e := i/rttSub - 1
	return int64(uint64(i%rttSub+rttSub) << e)
}

func (h *rttHist) add(rtt int64) {
	if rtt < 0 {
		rtt = 0
	}
	if h.counts == nil {
		h.counts = make([]uint64, rttBucket(1<<63-1)+1)
	}
	h.counts[rttBucket(uint64(rtt))]++
	h.n++
	h.max = max(h.max, rtt)
}

// merge adds o's samples to h.
func (h *rttHist) merge(o *rttHist) {
	if o.n == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]uint64, len(o.counts))
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the low edge of the bucket holding the sample of rank ceil(q*n).
func (h *rttHist) quantile(q float64) int64 {
	rank := uint64(q*float64(h.n) + 0.999999)
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(rttLow(i), h.max)
		}
	}
	return h.max
}

// summary is the histogram's RTTSummary (nil with no samples).
func (h *rttHist) summary() *RTTSummary {
	if h.n == 0 {
		return nil
	}
	return &RTTSummary{Samples: h.n, P50: h.quantile(0.5), P90: h.quantile(0.9), P99: h.quantile(0.99), Max: h.max}
}

// rttTap passes every call to the controller it wraps and records the RTT of each ACK.
// The engine finds what the wrapped controller offers besides cc.Controller through
// Unwrap; the path hop count, which it does not look up that way, is passed on by
// rttTapHops.
type rttTap struct {
	inner cc.Controller
	h     *rttHist
}

func (t *rttTap) OnAck(a cc.Ack) {
	t.h.add(a.RTT)
	t.inner.OnAck(a)
}

func (t *rttTap) OnLoss(l cc.Loss)      { t.inner.OnLoss(l) }
func (t *rttTap) Window() int           { return t.inner.Window() }
func (t *rttTap) PacingRate() int64     { return t.inner.PacingRate() }
func (t *rttTap) Unwrap() cc.Controller { return t.inner }

// SetHops passes the path's switch count on.
func (t *rttTapHops) SetHops(hops int) { t.inner.(hopSetter).SetHops(hops) }

// tapRTT wraps c so that its ACKs' RTTs go to h.
func tapRTT(c cc.Controller, h *rttHist) cc.Controller {
	if _, ok := c.(hopSetter); ok {
		return &rttTapHops{rttTap{c, h}}
	}
	return &rttTap{c, h}
}

// hopSetter is what a controller that takes the path's switch count offers (HPCC).
type hopSetter interface{ SetHops(int) }

// rttTapHops is rttTap for a controller that takes the path's switch count.
type rttTapHops struct{ rttTap }
