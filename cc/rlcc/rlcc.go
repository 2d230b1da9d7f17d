// Package rlcc is RL-CC with a distilled tree policy (Fuhrer et al., CCGrid 2023, arXiv:2207.02295; docs/references.md): a rate-based
// congestion controller that, once per RTT sample, computes
//
//	delta = target - max(rtt/brtt - beta, 0) * sqrt(rate)   (rate normalised to line rate)
//
// feeds delta and a sliding window of previous deltas and actions to a gradient-boosted
// ensemble of oblivious trees, and multiplies its rate by the returned action (clamped).
// The decision path is integer-only (Q24 fixed point) and costs fewer than 150 operations
// (docs/rlcc.md). The default model is embedded: trees distilled from a policy network
// trained by reinforcement learning in the simulator (package train, smartt-lab rlcc train).
package rlcc

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/hwprofile"
)

//go:embed default_model.json
var defaultModelJSON []byte

// DefaultModelJSON returns the embedded default model (smartt JSON format).
func DefaultModelJSON() []byte { return defaultModelJSON }

// Config holds RL-CC's parameters (transport.Config field `rlcc`).
type Config struct {
	// Target is the inflation control parameter (default 0.064).
	Target float64 `yaml:"target"`
	// Beta is the congestion tolerance: RTT inflation below it counts as no congestion (1.5).
	Beta float64 `yaml:"beta"`
	// InitialRate is a new flow's rate as a fraction of line rate (0, 1]. The NIC starts
	// at line rate; we default to 0.1 because an incast of many flows at line rate trims
	// the same packet often enough for the engine to abort connections (MaxRetransmits)
	// before the once-per-RTT decreases take hold; 0.1 reaches 0.25 in 10 decisions.
	InitialRate float64 `yaml:"initial_rate"`
	// MinRate is the floor of the rate as a fraction of line rate (0, InitialRate].
	MinRate float64 `yaml:"min_rate"`
	// MinAction and MaxAction clamp the action (the per-decision rate multiplier).
	MinAction float64 `yaml:"min_action"`
	MaxAction float64 `yaml:"max_action"`
	// WindowRTTs caps bytes in flight at rate * base RTT * WindowRTTs (a safety net when
	// RTT samples stop arriving; the rate is the control).
	WindowRTTs float64 `yaml:"window_rtts"`
	// Model is the path of a model file; empty means the embedded default model.
	Model string `yaml:"model"`
	// ModelFormat is "smartt" (our JSON, default) or "catboost" (CatBoost's JSON export).
	ModelFormat string `yaml:"model_format"`
	// CatBoostFeatures names the observation feature of each CatBoost float feature, in
	// order (default: the export's feature_id names).
	CatBoostFeatures []string `yaml:"catboost_features"`
	// Limits bound the model size (default 10 trees, depth 4).
	Limits Limits `yaml:"limits"`
	// Policy selects what decides: "trees" (default; integer-only, the NIC's) or "mlp",
	// the float64 policy network the trees were distilled from (simulator and training).
	Policy string `yaml:"policy"`
	// MLP is the path of a policy network file for Policy "mlp"; empty means the
	// embedded trained policy.
	MLP string `yaml:"mlp"`
}

// NetPolicy makes the controllers of Policy "mlp" (the float64 policy network). Package
// rlccnet sets it when a program links it (the simulator, training); the daemon does not,
// and refuses policy: mlp.
var NetPolicy func(cfg Config, net config.Network) (func() cc.Controller, error)

// DefaultConfig returns the default parameters: target 0.064, beta 1.5, actions
// within [1/1.2, 1.2] (NVIDIA's training code changes the rate by at most 20 % a step).
func DefaultConfig() Config {
	return Config{
		Target:      0.064,
		Beta:        1.5,
		InitialRate: 0.1,
		MinRate:     1e-4,
		MinAction:   1 / 1.2,
		MaxAction:   1.2,
		WindowRTTs:  4,
		Limits:      DefaultLimits,
	}
}

// Validate checks the ranges, naming the field.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("rlcc."+format, a...)) }
	if !(c.Target > 0 && c.Target < 16) {
		bad("target = %g: must be in (0, 16)", c.Target)
	}
	if !(c.Beta >= 0 && c.Beta < 32) {
		bad("beta = %g: must be in [0, 32)", c.Beta)
	}
	if !(c.InitialRate > 0 && c.InitialRate <= 1) {
		bad("initial_rate = %g: must be in (0, 1] (fraction of line rate)", c.InitialRate)
	}
	if !(c.MinRate > 0 && c.MinRate <= c.InitialRate) {
		bad("min_rate = %g: must be in (0, initial_rate]", c.MinRate)
	}
	if !(c.MinAction >= 0.5 && c.MinAction <= 1) {
		bad("min_action = %g: must be in [0.5, 1]", c.MinAction)
	}
	if !(c.MaxAction >= 1 && c.MaxAction <= 1.5) {
		bad("max_action = %g: must be in [1, 1.5]", c.MaxAction)
	}
	if !(c.WindowRTTs >= 1 && c.WindowRTTs <= 1000) {
		bad("window_rtts = %g: must be in [1, 1000]", c.WindowRTTs)
	}
	if c.ModelFormat != "" && c.ModelFormat != "smartt" && c.ModelFormat != "catboost" {
		bad("model_format = %q: must be smartt or catboost", c.ModelFormat)
	}
	if c.Policy != "" && c.Policy != "trees" && c.Policy != "mlp" {
		bad("policy = %q: must be trees or mlp", c.Policy)
	}
	return errors.Join(errs...)
}

// LoadModel reads the configured model (or the embedded default).
func (c Config) LoadModel() (*Model, error) {
	b := defaultModelJSON
	if c.Model != "" {
		var err error
		if b, err = os.ReadFile(c.Model); err != nil {
			return nil, fmt.Errorf("rlcc.model: %w", err)
		}
	}
	if c.ModelFormat == "catboost" {
		return ImportCatBoost(b, c.CatBoostFeatures, c.Limits)
	}
	return ParseModel(b, c.Limits)
}

// Params is what all flows of one configuration share: the compiled model and the
// constants of the decision path, in fixed point (on a NIC: global memory).
type Params struct {
	ens       *Ensemble
	model     *Model
	target    int64 // Q24
	beta      int64 // Q24
	invBrtt   int64 // 2^40 / brtt
	maxRTT    int64 // ns: RTT samples are clamped to 64 base RTTs (delta saturates)
	minA      int64 // Q24
	maxA      int64 // Q24
	sMin      int64 // Q24 sqrt of the minimum rate
	sInit     int64 // Q24 sqrt of the initial rate
	line      int64 // line rate in bytes/s >> 8
	bdpWin    int64 // window cap at line rate, bytes
	mtu       int64
	globalNIC int
}

// NewParams compiles cfg for a network; errors name the field.
func NewParams(cfg Config, net config.Network) (*Params, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := net.Validate(); err != nil {
		return nil, err
	}
	m, err := cfg.LoadModel()
	if err != nil {
		return nil, err
	}
	return NewParamsWithModel(cfg, net, m)
}

// NewParamsWithModel is NewParams with the model given (validated against cfg.Limits)
// instead of loaded.
func NewParamsWithModel(cfg Config, net config.Network, m *Model) (*Params, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := m.Validate(cfg.Limits); err != nil {
		return nil, err
	}
	lineBytes := net.LinkRate / 8
	p := &Params{
		ens:     Compile(m),
		model:   m,
		target:  toFixed(cfg.Target),
		beta:    toFixed(cfg.Beta),
		invBrtt: (int64(1) << 40) / net.BaseRTT,
		maxRTT:  64 * net.BaseRTT,
		minA:    toFixed(cfg.MinAction),
		maxA:    toFixed(cfg.MaxAction),
		sMin:    toFixed(math.Sqrt(cfg.MinRate)),
		sInit:   toFixed(math.Sqrt(cfg.InitialRate)),
		line:    lineBytes >> 8,
		bdpWin:  min(int64(float64(lineBytes)*float64(net.BaseRTT)*cfg.WindowRTTs/1e9), 1<<30),
		mtu:     int64(net.MTU),
	}
	p.globalNIC = p.ens.Bytes() + 9*4 // model + the nine constants above, 4 bytes each
	return p, nil
}

// Model returns the model the parameters were compiled from.
func (p *Params) Model() *Model { return p.model }

// Ensemble returns the compiled model.
func (p *Params) Ensemble() *Ensemble { return p.ens }

// state is RL-CC's per-flow state as a NIC's CC program holds it (Cost().StateBytes is
// its packed size, the sum of its fields).
type state struct {
	last   int64 // ns: time of the last decision
	s      int32 // Q24 sqrt of the normalised rate: the rate is s^2, so sqrt(rate) is free
	d1     int32 // Q24 delta_{t-1}
	a1, a2 int32 // Q24 a_{t-1}, a_{t-2}
	rtt    int32 // ns, the latest RTT sample (gates loss-driven decisions)
}

// Controller is RL-CC for one connection; it implements cc.Controller and hwprofile.Coster.
type Controller struct {
	p  *Params
	st state
	// Outputs of a decision, not CC state: on a NIC the rate is the rate limiter's
	// register; the window is the engine's safety net.
	rate   int64 // bytes/s
	window int
	n      uint32 // decisions made (diagnostics)
}

// New returns a controller at the initial rate.
func New(p *Params) *Controller {
	c := &Controller{p: p}
	c.st.s = int32(p.sInit)
	c.st.a1, c.st.a2 = int32(one), int32(one)
	c.setRate()
	return c
}

// OnAck makes one decision per RTT sample of a packet sent after the previous decision,
// so each decision sees the effect of the one before (as the NIC's RTT probes do).
func (c *Controller) OnAck(a cc.Ack) {
	if a.RTT <= 0 || a.Now-a.RTT < c.st.last {
		return
	}
	c.st.last = a.Now
	c.st.rtt = int32(min(a.RTT, math.MaxInt32))
	c.Decide(a.RTT)
}

// OnLoss treats a lost packet (trimmed, or timed out) as an RTT sample of unbounded
// length, clamped like every sample to 64 base RTTs: delta is then far below -target and
// the policy answers with its strongest decrease. The paper's delta lies in [-inf, target]
// for this reason. The same once-per-RTT gating applies, using the latest RTT sample.
func (c *Controller) OnLoss(l cc.Loss) {
	if l.Now-int64(c.st.rtt) < c.st.last {
		return
	}
	c.st.last = l.Now
	c.Decide(c.p.maxRTT)
}

// Window returns the in-flight cap: rate * base RTT * WindowRTTs, at least one MTU.
func (c *Controller) Window() int { return c.window }

// PacingRate returns the current rate in bytes/s (always > 0).
func (c *Controller) PacingRate() int64 { return c.rate }

// Rate returns the current rate as a fraction of line rate.
func (c *Controller) Rate() float64 { s := FromFixed(int64(c.st.s)); return s * s }

// Decisions returns the number of decisions made.
func (c *Controller) Decisions() uint32 { return c.n }

// Decide runs one decision on an RTT sample (ns): integer operations only.
func (c *Controller) Decide(rtt int64) {
	p := c.p
	st := &c.st
	var x [NumFeatures]int64
	x[FeatDelta] = p.delta(rtt, int64(st.s))
	x[FeatDeltaPrev] = int64(st.d1)
	x[FeatActionPrev] = int64(st.a1)
	x[FeatActionPrev2] = int64(st.a2)
	x[FeatRate] = int64(st.s) * int64(st.s) >> fracBits
	a := p.ens.Predict(&x)
	a = min(max(a, p.minA), p.maxA)
	// s' = s * sqrt(a): third-order series of sqrt(1+u), |u| <= 0.5; relative error
	// below 2e-4 at |u| = 0.2 and 1e-7 at |u| = 0.02 (the rate is s^2 by definition).
	u := a - one
	u2 := u * u >> fracBits
	u3 := u2 * u >> fracBits
	r := one + u>>1 - u2>>3 + u3>>4
	s := int64(st.s) * r >> fracBits
	s = min(max(s, p.sMin), one)
	st.s = int32(s)
	st.d1 = int32(x[FeatDelta])
	st.a2, st.a1 = st.a1, int32(a)
	c.n++
	c.setRate()
}

// delta computes the observation's delta in Q24 from an RTT sample and sqrt(rate).
func (p *Params) delta(rtt, s int64) int64 {
	rtt = min(rtt, p.maxRTT)
	infl := rtt * p.invBrtt >> 16 // Q24
	e := max(infl-p.beta, 0)
	return p.target - e*s>>fracBits
}

// setRate derives the pacing rate and the window cap from s.
func (c *Controller) setRate() {
	p := c.p
	r := int64(c.st.s) * int64(c.st.s) >> fracBits // Q24 fraction of line rate
	c.rate = max(r*p.line>>16, 1)
	c.window = int(max(r*p.bdpWin>>fracBits, p.mtu))
}

// decideCounted mirrors Decide with an operation count per docs/rlcc.md's cost model:
// ALU instructions and loads/stores of per-flow state; parameters (borders, leaves,
// constants) are immediates of the NIC's generated code. The once-per-RTT gate of OnAck
// (5 ops: load, sub, compare, two stores) filters feedback and is reported apart.
func (c *Controller) decideCounted(rtt int64) (ops int) {
	p := c.p
	st := &c.st
	var x [NumFeatures]int64
	rtt = min(rtt, p.maxRTT) // 1
	infl := rtt * p.invBrtt >> 16
	e := max(infl-p.beta, 0)
	x[FeatDelta] = p.target - e*int64(st.s)>>fracBits
	ops += 1 + 2 + 2 + 3 // clamp; mul, shift; sub, max; mul, shift, sub
	x[FeatDeltaPrev] = int64(st.d1)
	x[FeatActionPrev] = int64(st.a1)
	x[FeatActionPrev2] = int64(st.a2)
	x[FeatRate] = int64(st.s) * int64(st.s) >> fracBits
	ops += 4 + 2 // four state loads (s, d1, a1, a2); mul, shift
	a := p.ens.predictCounted(&x, &ops)
	a = min(max(a, p.minA), p.maxA)
	ops += 2
	u := a - one
	u2 := u * u >> fracBits
	u3 := u2 * u >> fracBits
	r := one + u>>1 - u2>>3 + u3>>4
	ops += 1 + 2 + 2 + 6 // sub; mul, shift; mul, shift; 3 shifts, 3 add/sub
	s := int64(st.s) * r >> fracBits
	s = min(max(s, p.sMin), one)
	ops += 2 + 2
	st.s = int32(s)
	st.d1 = int32(x[FeatDelta])
	st.a2, st.a1 = st.a1, int32(a)
	c.n++
	ops += 4 // four state stores
	rr := int64(st.s) * int64(st.s) >> fracBits
	c.rate = max(rr*p.line>>16, 1)
	c.window = int(max(rr*p.bdpWin>>fracBits, p.mtu))
	ops += 2 + 3 + 3 + 2 // mul, shift; mul, shift, max; mul, shift, max; two stores (rate limiter, window)
	return ops
}

// DecisionOps is the worst-case operation count of one decision with this model.
func (p *Params) DecisionOps() int { return decisionFixedOps + p.ens.Ops() }

// decisionFixedOps is decideCounted's count outside the ensemble.
const decisionFixedOps = 8 + 6 + 2 + 11 + 4 + 4 + 10

// StateBytes is the packed per-flow state of a controller: 8 + 5*4 bytes (the Go struct
// pads it to 32).
const StateBytes = 28

// Cost reports RL-CC's hardware cost: per-flow state, the model and constants as global
// memory, the decision's operation count, integer-only.
func (c *Controller) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "rlcc", StateBytes: StateBytes, GlobalBytes: c.p.globalNIC,
		Ops: c.p.DecisionOps(), IntegerOnly: true}
}
