package transport

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/dctcp"
	"github.com/smartt-transport/smartt/cc/eqds"
	"github.com/smartt-transport/smartt/hwprofile"
)

// EQDS capped by a sender-based controller (the SMaRTT paper's Fig. 13): the receiver's
// PULLs still decide when a packet may go, and the sender-based controller's window caps
// what may be in flight, so a sender holding credit still stops when its own congestion
// signals (ECN, delay, trims) say the path is full. Registered as "eqds-smartt" and
// "eqds-mprdma"; both use the eqds credit mechanism and read ECN.
func init() {
	registerCC(CCRegistration{Name: "eqds-smartt", Prepare: func(cfg *Config) (func() cc.Controller, error) {
		mk, err := prepareSMaRTT(cfg, cfg.SMaRTT.FixedPoint)
		if err != nil {
			return nil, err
		}
		return prepareEQDSCapped(cfg, "eqds-smartt", mk)
	}, Credit: "eqds", Needs: CCNeeds{ECN: true}})
	registerCC(CCRegistration{Name: "eqds-mprdma", Prepare: func(cfg *Config) (func() cc.Controller, error) {
		p, err := dctcp.NewParams("mprdma", cfg.MPRDMA, cfg.Network())
		if err != nil {
			return nil, err
		}
		return prepareEQDSCapped(cfg, "eqds-mprdma", func() cc.Controller { return dctcp.NewMPRDMA(p) })
	}, Credit: "eqds", Needs: CCNeeds{ECN: true}})
}

// prepareEQDSCapped derives EQDS's parameters once per endpoint and pairs each
// connection's EQDS sender with a fresh capping controller from mk.
func prepareEQDSCapped(cfg *Config, name string, mk func() cc.Controller) (func() cc.Controller, error) {
	p, err := eqdsParams(cfg)
	if err != nil {
		return nil, err
	}
	return func() cc.Controller { return &eqdsCapped{Sender: eqds.New(p), cap: mk(), name: name} }, nil
}

// eqdsCapped is EQDS's sender (embedded: its CanSend, OnSend, OnPull and Respeculate make
// it the engine's credit gate) with a sender-based controller whose window caps it.
type eqdsCapped struct {
	*eqds.Sender
	cap  cc.Controller
	name string
}

// OnAck feeds the capping controller; EQDS's sender ignores ACKs.
func (c *eqdsCapped) OnAck(a cc.Ack) { c.cap.OnAck(a) }

// OnLoss refunds EQDS's credit for a packet lost whole and lets the cap react too.
func (c *eqdsCapped) OnLoss(l cc.Loss) {
	c.Sender.OnLoss(l)
	c.cap.OnLoss(l)
}

// Window is the smaller of EQDS's safety cap and the capping controller's window.
func (c *eqdsCapped) Window() int { return min(c.Sender.Window(), c.cap.Window()) }

// PacingRate is the capping controller's (0 for SMaRTT and MPRDMA: window-only).
func (c *eqdsCapped) PacingRate() int64 { return c.cap.PacingRate() }

// CCStats reports the capping controller's counters (EQDS keeps none).
func (c *eqdsCapped) CCStats() cc.Stats {
	if s, ok := c.cap.(cc.StatsReporter); ok {
		return s.CCStats()
	}
	return cc.Stats{}
}

// Cost is the sum of both halves: both states are kept and both decide per packet.
func (c *eqdsCapped) Cost() hwprofile.Cost {
	a := c.Sender.Cost()
	b, _ := hwprofile.CostOf("cc", c.name, c.cap)
	return hwprofile.Cost{Name: c.name, StateBytes: a.StateBytes + b.StateBytes, GlobalBytes: a.GlobalBytes + b.GlobalBytes,
		Ops: a.Ops + b.Ops, IntegerOnly: a.IntegerOnly && b.IntegerOnly}
}
