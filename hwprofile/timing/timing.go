// Package timing measures and emulates a NIC's congestion-control decision time around
// any cc.Controller: Timed records the wall time of every decision into a histogram with a
// count of budget overruns (the daemon installs it; the engine stays clock-free), and
// Delayed applies feedback a fixed latency after it arrived, so the effect of slow
// inference (the RL-CC paper's Table II) can be reproduced in the simulator.
package timing

import (
	"fmt"
	_ "unsafe" // for go:linkname

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/hwprofile"
)

// nanotime is the runtime's monotonic clock: one vDSO read, cheaper than time.Now (which
// also reads the wall clock).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Now returns the monotonic clock in ns (only differences are meaningful).
func Now() int64 { return nanotime() }

// NumBuckets is the number of histogram buckets: bucket 0 holds 0 ns, bucket i holds
// [2^(i-1), 2^i) ns, the last everything above.
const NumBuckets = 32

// Histogram is a log2 histogram of durations in ns.
type Histogram struct {
	Buckets [NumBuckets]uint64
	Count   uint64
	Sum     uint64 // ns
	Max     uint64 // ns
}

// Add records one duration.
func (h *Histogram) Add(ns int64) {
	if ns < 0 {
		ns = 0
	}
	u := uint64(ns)
	b := 0
	for v := u; v > 0 && b < NumBuckets-1; v >>= 1 {
		b++
	}
	h.Buckets[b]++
	h.Count++
	h.Sum += u
	h.Max = max(h.Max, u)
}

// Quantile returns an upper bound of the q-quantile (0..1): the top of the bucket it lies in.
func (h *Histogram) Quantile(q float64) uint64 {
	if h.Count == 0 {
		return 0
	}
	rank := uint64(q * float64(h.Count))
	var seen uint64
	for i, n := range h.Buckets {
		seen += n
		if seen > rank {
			if i == 0 {
				return 0
			}
			return min(uint64(1)<<i, h.Max)
		}
	}
	return h.Max
}

// Mean returns the mean duration in ns.
func (h *Histogram) Mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return float64(h.Sum) / float64(h.Count)
}

// decider is implemented by controllers that count their decisions (rlcc does): Timed
// then records only the calls that made one, not the feedback a controller skipped.
type decider interface{ Decisions() uint32 }

// Timed wraps a controller and measures each decision (OnAck/OnLoss call that decided)
// against a budget. It is not safe for concurrent use (one per connection, like the
// controller).
type Timed struct {
	Inner    cc.Controller
	Budget   int64 // ns; 0: no overrun accounting
	Hist     Histogram
	Overruns uint64 // decisions that took longer than Budget
	dec      decider
}

// NewTimed wraps c with a decision-time budget in ns (e.g. a profile's DecisionNs).
func NewTimed(c cc.Controller, budget int64) *Timed {
	t := &Timed{Inner: c, Budget: budget}
	t.dec, _ = c.(decider)
	return t
}

func (t *Timed) record(start int64, before uint32) {
	d := nanotime() - start
	if t.dec != nil && t.dec.Decisions() == before {
		return // feedback the controller skipped: not a decision
	}
	t.Hist.Add(d)
	if t.Budget > 0 && d > t.Budget {
		t.Overruns++
	}
}

func (t *Timed) decisions() uint32 {
	if t.dec != nil {
		return t.dec.Decisions()
	}
	return 0
}

// OnAck times the inner controller's OnAck.
func (t *Timed) OnAck(a cc.Ack) {
	before := t.decisions()
	start := nanotime()
	t.Inner.OnAck(a)
	t.record(start, before)
}

// OnLoss times the inner controller's OnLoss.
func (t *Timed) OnLoss(l cc.Loss) {
	before := t.decisions()
	start := nanotime()
	t.Inner.OnLoss(l)
	t.record(start, before)
}

// Window is the inner controller's.
func (t *Timed) Window() int { return t.Inner.Window() }

// PacingRate is the inner controller's.
func (t *Timed) PacingRate() int64 { return t.Inner.PacingRate() }

// Cost is the inner controller's, so a profile check sees through the wrapper.
func (t *Timed) Cost() hwprofile.Cost { return costOf(t.Inner) }

// Unwrap returns the wrapped controller.
func (t *Timed) Unwrap() cc.Controller { return t.Inner }

func costOf(c cc.Controller) hwprofile.Cost {
	if x, ok := c.(hwprofile.Coster); ok {
		return x.Cost()
	}
	// Fails every profile, saying why.
	return hwprofile.Cost{Name: fmt.Sprintf("%T (reports no hwprofile.Cost)", c), StateBytes: 1 << 30}
}

// pending is feedback waiting for its emulated decision to complete.
type pending struct {
	due  int64
	ack  cc.Ack
	loss cc.Loss
	lost bool
}

// DefaultQueue is the capacity of Delayed's feedback queue when NewDelayed gets 0.
const DefaultQueue = 4096

// Delayed applies every piece of feedback Latency ns after it arrived, emulating a NIC
// whose decisions take that long: an ACK or loss at time t reaches the inner controller
// at the first feedback event at or after t + Latency (with an ACK per packet, within a
// packet time), with its Now set to that moment. The queue is a fixed ring; when it is
// full the oldest waiting feedback is dropped and counted, as a NIC's CC event queue
// would overflow.
type Delayed struct {
	Inner   cc.Controller
	Latency int64
	Dropped uint64 // feedback lost to a full queue
	q       []pending
	head, n int
}

// NewDelayed wraps c with a decision latency in ns and a queue of capacity entries
// (0: DefaultQueue).
func NewDelayed(c cc.Controller, latency int64, capacity int) *Delayed {
	if capacity <= 0 {
		capacity = DefaultQueue
	}
	return &Delayed{Inner: c, Latency: latency, q: make([]pending, capacity)}
}

// Flush applies all feedback due at or before now.
func (d *Delayed) Flush(now int64) {
	for d.n > 0 {
		p := &d.q[d.head]
		if p.due > now {
			return
		}
		d.head = (d.head + 1) % len(d.q)
		d.n--
		if p.lost {
			l := p.loss
			l.Now = now
			d.Inner.OnLoss(l)
		} else {
			a := p.ack
			a.Now = now
			d.Inner.OnAck(a)
		}
	}
}

func (d *Delayed) push(p pending) {
	if d.n == len(d.q) {
		d.head = (d.head + 1) % len(d.q)
		d.n--
		d.Dropped++
	}
	d.q[(d.head+d.n)%len(d.q)] = p
	d.n++
}

// OnAck queues the ACK and applies whatever is due.
func (d *Delayed) OnAck(a cc.Ack) {
	d.Flush(a.Now)
	if d.Latency <= 0 {
		d.Inner.OnAck(a)
		return
	}
	d.push(pending{due: a.Now + d.Latency, ack: a})
}

// OnLoss queues the loss and applies whatever is due.
func (d *Delayed) OnLoss(l cc.Loss) {
	d.Flush(l.Now)
	if d.Latency <= 0 {
		d.Inner.OnLoss(l)
		return
	}
	d.push(pending{due: l.Now + d.Latency, loss: l, lost: true})
}

// Window is the inner controller's.
func (d *Delayed) Window() int { return d.Inner.Window() }

// PacingRate is the inner controller's.
func (d *Delayed) PacingRate() int64 { return d.Inner.PacingRate() }

// Cost is the inner controller's.
func (d *Delayed) Cost() hwprofile.Cost { return costOf(d.Inner) }

// Pending returns the feedback waiting to be applied.
func (d *Delayed) Pending() int { return d.n }
