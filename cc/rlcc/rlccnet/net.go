// Package rlccnet is RL-CC driven by the float64 policy network (an MLP) the default tree
// model was distilled from: the teacher, for the simulator and training. The engine links
// the integer-only tree controller (package rlcc) only; a program that imports this
// package (test/sim, smartt-lab) also runs rlcc.policy: mlp (rlcc.NetPolicy).
package rlccnet

import (
	_ "embed"
	"fmt"
	"math"
	"os"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/rlcc"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/hwprofile"
)

func init() {
	rlcc.NetPolicy = func(cfg rlcc.Config, net config.Network) (func() cc.Controller, error) {
		np, err := NewNetParams(cfg, net, nil)
		if err != nil {
			return nil, err
		}
		return func() cc.Controller { return NewNet(np) }, nil
	}
}

//go:embed default_policy.json
var defaultPolicyJSON []byte

// DefaultPolicyJSON returns the embedded trained policy network (the teacher of the
// default tree model).
func DefaultPolicyJSON() []byte { return defaultPolicyJSON }

// LoadMLP reads the configured policy network (c.MLP, or the embedded default).
func LoadMLP(c rlcc.Config) (*MLP, error) {
	b := defaultPolicyJSON
	if c.MLP != "" {
		var err error
		if b, err = os.ReadFile(c.MLP); err != nil {
			return nil, fmt.Errorf("rlcc.mlp: %w", err)
		}
	}
	m, _, err := ParseMLP(b)
	return m, err
}

// Decision is what a NetController saw and did in one decision (training and
// distillation record it).
type Decision struct {
	X       [rlcc.NumFeatures]float64 // observation features (as the tree controller's)
	In      [NumNetInputs]float64     // network input
	U       float64                   // network output (tanh units)
	Delta   float64                   // delta_t
	PrevIn  [NumNetInputs]float64     // the previous decision's input: Delta is its outcome
	HasPrev bool                      // PrevIn is set (not the flow's first decision)
	Loss    bool                      // decided on a loss
	Now     int64                     // ns, when
}

// NetParams is what all NetControllers of one configuration share: the network and the
// constants of the decision, in float64.
type NetParams struct {
	Net *MLP
	// OnDecision, if set, is called after every decision (training, distillation).
	OnDecision func(c *NetController, d *Decision)
	cfg        rlcc.Config
	brtt       float64
	maxRTT     int64
	line       float64 // bytes/s
	bdpWin     float64 // window cap at line rate, bytes
	mtu        int
}

// NewNetParams compiles cfg for a network with the policy net (nil: LoadMLP(cfg)).
func NewNetParams(cfg rlcc.Config, net config.Network, m *MLP) (*NetParams, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := net.Validate(); err != nil {
		return nil, err
	}
	if m == nil {
		var err error
		if m, err = LoadMLP(cfg); err != nil {
			return nil, err
		}
	}
	line := float64(net.LinkRate) / 8
	return &NetParams{Net: m, cfg: cfg, brtt: float64(net.BaseRTT), maxRTT: 64 * net.BaseRTT,
		line: line, bdpWin: min(line*float64(net.BaseRTT)*cfg.WindowRTTs/1e9, 1<<30), mtu: net.MTU}, nil
}

// NetController is RL-CC driven by the policy network in float64 (the paper's teacher):
// for the simulator and training, not a NIC. Its decision rule is the tree controller's
// (one decision per RTT sample of a packet sent after the previous decision, a loss is an
// RTT of 64 base RTTs, the same observation), with the action a = tanh(.) applied as
// rate *= 1 + 0.2a or rate /= 1 - 0.2a.
type NetController struct {
	p      *NetParams
	last   int64
	rtt    int64
	rate   float64 // fraction of line rate
	d1     float64
	a1, a2 float64 // multipliers
	prevIn [NumNetInputs]float64
	n      uint32
	pace   int64
	window int
	d      Decision // the last decision (OnDecision's argument; no allocation)
	// Flow identifies the controller to OnDecision (set by the caller).
	Flow int
}

// NewNet returns a network-driven controller at the initial rate.
func NewNet(p *NetParams) *NetController {
	c := &NetController{p: p, rate: p.cfg.InitialRate, a1: 1, a2: 1}
	c.setRate()
	return c
}

// OnAck decides once per RTT sample of a packet sent after the previous decision.
func (c *NetController) OnAck(a cc.Ack) {
	if a.RTT <= 0 || a.Now-a.RTT < c.last {
		return
	}
	c.last = a.Now
	c.rtt = a.RTT
	c.decide(a.RTT, false)
}

// OnLoss decides as on an RTT of 64 base RTTs, gated like OnAck by the latest RTT sample.
func (c *NetController) OnLoss(l cc.Loss) {
	if l.Now-c.rtt < c.last {
		return
	}
	c.last = l.Now
	c.decide(c.p.maxRTT, true)
}

func (c *NetController) decide(rtt int64, loss bool) {
	p := c.p
	infl := float64(min(rtt, p.maxRTT)) / p.brtt
	s := math.Sqrt(c.rate)
	d := &c.d
	*d = Decision{}
	d.Delta = p.cfg.Target - max(infl-p.cfg.Beta, 0)*s
	d.X = [rlcc.NumFeatures]float64{rlcc.FeatDelta: d.Delta, rlcc.FeatDeltaPrev: c.d1, rlcc.FeatActionPrev: c.a1, rlcc.FeatActionPrev2: c.a2, rlcc.FeatRate: c.rate}
	d.In = NetInput(&d.X)
	d.U = p.Net.Forward(&d.In)
	m := min(max(Multiplier(d.U), p.cfg.MinAction), p.cfg.MaxAction)
	d.PrevIn, d.HasPrev, d.Loss, d.Now = c.prevIn, c.n > 0, loss, c.last
	c.rate = min(max(c.rate*m, p.cfg.MinRate), 1)
	c.d1, c.a2, c.a1 = d.Delta, c.a1, m
	c.prevIn = d.In
	c.n++
	c.setRate()
	if p.OnDecision != nil {
		p.OnDecision(c, d)
	}
}

func (c *NetController) setRate() {
	c.pace = max(int64(c.rate*c.p.line), 1)
	c.window = max(int(c.rate*c.p.bdpWin), c.p.mtu)
}

// Window returns the in-flight cap: rate * base RTT * WindowRTTs, at least one MTU.
func (c *NetController) Window() int { return c.window }

// PacingRate returns the rate in bytes/s.
func (c *NetController) PacingRate() int64 { return c.pace }

// Rate returns the rate as a fraction of line rate.
func (c *NetController) Rate() float64 { return c.rate }

// Decisions returns the number of decisions made.
func (c *NetController) Decisions() uint32 { return c.n }

// Cost reports the network policy's cost: floating point, its flops as operations (a
// NIC cannot run it in budget: the paper measured 17 us per MLP decision).
func (c *NetController) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "rlcc-mlp", StateBytes: 8 + 8 + 4*8 + NumNetInputs*8,
		GlobalBytes: 8 * len(c.p.Net.Theta), Ops: c.p.Net.Flops(), IntegerOnly: false}
}
