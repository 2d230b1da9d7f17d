package smartt_test

import (
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/cctest"
	"github.com/smartt-transport/smartt/cc/smartt"
	"github.com/smartt-transport/smartt/transport"
)

// The closed-loop rig is cc/cctest's, shared by every controller; these names keep the
// SMaRTT tests' arithmetic short.
const (
	linkRate = cctest.LinkRate
	mtu      = cctest.MTU
)

func baseRTT() int64 { return cctest.BaseRTT() }

func bdpBytes() int { return cctest.BDP() }

// sample is one ACK's view of a flow: time, window after it, bytes acknowledged so far.
type sample struct {
	t      int64
	cwnd   int
	acked  int64
	inflow int
}

// flow wraps one sender's controller: it records the timeline and, with a shadow,
// feeds the shadow the same events and tracks the largest window difference.
type flow struct {
	cc.Controller
	stats    func() smartt.Stats
	acked    int64
	timeline []sample
	record   bool
	shadow   interface {
		cc.Controller
		Cwnd() float64
	}
	live    interface{ Cwnd() float64 }
	steps   int
	maxErr  float64
	overMTU int
}

func (f *flow) OnAck(a cc.Ack) {
	f.Controller.OnAck(a)
	f.acked += int64(a.Bytes)
	if f.record {
		f.timeline = append(f.timeline, sample{a.Now, f.Window(), f.acked, a.InFlight})
	}
	f.compare(func(c cc.Controller) { c.OnAck(a) })
}

func (f *flow) OnLoss(l cc.Loss) {
	f.Controller.OnLoss(l)
	f.compare(func(c cc.Controller) { c.OnLoss(l) })
}

func (f *flow) compare(ev func(cc.Controller)) {
	if f.shadow == nil {
		return
	}
	ev(f.shadow)
	f.steps++
	d := f.shadow.Cwnd() - f.live.Cwnd()
	if d < 0 {
		d = -d
	}
	if d > f.maxErr {
		f.maxErr = d
	}
	if d > mtu {
		f.overMTU++
	}
}

type rigOpts struct {
	senders  int
	trim     bool
	fixed    bool // the live controllers are the fixed-point implementation
	shadow   bool // float live, fixed shadow
	record   bool
	mod      func(*smartt.Config)
	sampleNs int64 // queue sampling interval at the bottleneck (0: off)
	rto      int64 // MinRTO, ns (0: 3 base RTTs)
	seed     uint64
}

// rig is cctest's rig with SMaRTT's flows (timelines, shadows, counters).
type rig struct {
	*cctest.Rig
	flows  []*flow
	params *smartt.Params
}

func newRig(t testing.TB, o rigOpts) *rig {
	t.Helper()
	cfg := cctest.Config(o.trim)
	if o.mod != nil {
		o.mod(&cfg.SMaRTT)
	}
	p, err := smartt.NewParams(cfg.SMaRTT, cfg.Network(), cfg.Trimming)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{params: p}
	for range o.senders {
		r.flows = append(r.flows, &flow{record: o.record})
	}
	r.Rig = cctest.New(t, cctest.Options{Senders: o.senders, Trim: o.trim, Seed: o.seed, SampleNs: o.sampleNs, RTO: o.rto,
		Mod: func(c *transport.Config) { c.SMaRTT = cfg.SMaRTT },
		NewCC: func(i int) cc.Controller {
			f := r.flows[i]
			switch {
			case o.shadow:
				live := smartt.NewFloat(p)
				f.Controller, f.stats, f.live = live, live.Stats, live
				f.shadow = smartt.NewFixed(p)
			case o.fixed:
				c := smartt.NewFixed(p)
				f.Controller, f.stats = c, c.Stats
			default:
				c := smartt.NewFloat(p)
				f.Controller, f.stats = c, c.Stats
			}
			return f
		}})
	return r
}

// sum adds the controllers' counters.
func (r *rig) sum() smartt.Stats {
	var s smartt.Stats
	for _, f := range r.flows {
		x := f.stats()
		s.Acks += x.Acks
		s.Ignored += x.Ignored
		s.FairDecrease += x.FairDecrease
		s.MultDecrease += x.MultDecrease
		s.FairIncrease += x.FairIncrease
		s.MultIncrease += x.MultIncrease
		s.WTDHeld += x.WTDHeld
		s.QuickAdapt += x.QuickAdapt
		s.FastIncrease += x.FastIncrease
		s.FastIncreaseAcks += x.FastIncreaseAcks
		s.LossTrim += x.LossTrim
		s.LossTimeout += x.LossTimeout
		s.LossSack += x.LossSack
		s.LossNotCut += x.LossNotCut
		s.ClampMin += x.ClampMin
		s.ClampMax += x.ClampMax
	}
	return s
}

// ackedAt returns a flow's cumulative acknowledged bytes at time t (from its timeline).
func (f *flow) ackedAt(t int64) int64 {
	lo, hi := 0, len(f.timeline)
	for lo < hi {
		m := (lo + hi) / 2
		if f.timeline[m].t <= t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0
	}
	return f.timeline[lo-1].acked
}
