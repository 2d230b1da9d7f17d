package daemon

import (
	"fmt"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/hwprofile"
	"github.com/smartt-transport/smartt/hwprofile/timing"
	"github.com/smartt-transport/smartt/transport"
)

// DecisionStats is the congestion controllers' decision time on this host.
type DecisionStats struct {
	Hist     timing.Histogram // ns per decision (OnAck/OnLoss call that decided)
	Overruns uint64           // decisions longer than the budget
	Budget   int64            // ns (0: none)
}

// timedCC measures each decision of a controller into its shard's histogram. Every engine
// call runs under the shard's lock, so one histogram serves the shard's connections.
type timedCC struct {
	cc.Controller
	n   *shard
	dec interface{ Decisions() uint32 }
}

func (t *timedCC) decisions() uint32 {
	if t.dec != nil {
		return t.dec.Decisions()
	}
	return 0
}

func (t *timedCC) record(start int64, before uint32) {
	d := timing.Now() - start
	if t.dec != nil && t.dec.Decisions() == before {
		return // feedback the controller skipped: not a decision
	}
	t.n.decisions.Hist.Add(d)
	if b := t.n.decisions.Budget; b > 0 && d > b {
		t.n.decisions.Overruns++
	}
}

// OnAck times the inner controller's OnAck.
func (t *timedCC) OnAck(a cc.Ack) {
	before := t.decisions()
	start := timing.Now()
	t.Controller.OnAck(a)
	t.record(start, before)
}

// OnLoss times the inner controller's OnLoss.
func (t *timedCC) OnLoss(l cc.Loss) {
	before := t.decisions()
	start := timing.Now()
	t.Controller.OnLoss(l)
	t.record(start, before)
}

// Cost is the inner controller's, so a profile check sees through the wrapper.
func (t *timedCC) Cost() hwprofile.Cost {
	if x, ok := t.Controller.(hwprofile.Coster); ok {
		return x.Cost()
	}
	return hwprofile.Cost{Name: fmt.Sprintf("%T (reports no hwprofile.Cost)", t.Controller), StateBytes: 1 << 30}
}

// Unwrap returns the wrapped controller.
func (t *timedCC) Unwrap() cc.Controller { return t.Controller }

// installTiming makes h build timed controllers (of h's or cfg's) for shard n.
func installTiming(cfg *transport.Config, h *transport.Hooks, n *shard) error {
	inner := h.NewCC
	if inner == nil {
		base := *cfg
		name := cfg.CC
		if _, err := transport.NewCC(name, base); err != nil {
			return err
		}
		inner = func() cc.Controller {
			c, _ := transport.NewCC(name, base) // checked above
			return c
		}
	}
	h.NewCC = func() cc.Controller {
		c := inner()
		t := &timedCC{Controller: c, n: n}
		t.dec, _ = c.(interface{ Decisions() uint32 })
		return t
	}
	return nil
}

// Decisions returns a snapshot of the decision-time statistics, merged over the shards
// (zero unless Options.TimeDecisions).
func (n *Node) Decisions() DecisionStats {
	var d DecisionStats
	for _, s := range n.shards {
		s.mu.Lock()
		x := s.decisions
		s.mu.Unlock()
		d.Budget = x.Budget
		d.Overruns += x.Overruns
		for i, b := range x.Hist.Buckets {
			d.Hist.Buckets[i] += b
		}
		d.Hist.Count += x.Hist.Count
		d.Hist.Sum += x.Hist.Sum
		d.Hist.Max = max(d.Hist.Max, x.Hist.Max)
	}
	return d
}
