// Package fixedrate is the controller of the AI-training load-balancing study
// (McClure, Ratnasamy, Shenker, "Load Balancing for AI Training Workloads", arXiv:2507.21372, 2025): every connection
// is paced at a fixed rate, a fraction of the line rate or a coefficient times its fair
// share (the line rate divided by the flows sharing the host's link, known from the
// topology and the collective), and does not react to congestion: ECN marks, delay and
// losses only decide which packet goes next (loss recovery), never how fast.
//
// cc.Fixed (a constant window, unpaced) is a different controller: this one is paced.
package fixedrate

import (
	"errors"
	"fmt"
	"math"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/hwprofile"
)

// Config holds the rate (YAML section "fixed_rate"): either Fraction of the line rate,
// or Coefficient x the fair share LinkRate / FairShareFlows (when Coefficient > 0).
type Config struct {
	// Fraction is the rate as a fraction of the line rate (default 1), used when
	// Coefficient is 0.
	Fraction float64 `yaml:"fraction"`
	// Coefficient is the study's "rate coefficient": the rate is Coefficient x the fair
	// share (0: use Fraction).
	Coefficient float64 `yaml:"coefficient"`
	// FairShareFlows is the number of flows sharing the host's link: the fair share is
	// the line rate divided by it (required with Coefficient).
	FairShareFlows int `yaml:"fair_share_flows"`
	// WindowBDP caps the bytes in flight in bandwidth-delay products at line rate
	// (0, the default: no cap, as in the study, where only the pacer limits a sender).
	WindowBDP float64 `yaml:"window_bdp"`
}

// DefaultConfig paces at line rate.
func DefaultConfig() Config { return Config{Fraction: 1} }

// Params are the constants derived once per endpoint.
type Params struct {
	rate   int64 // bytes/s
	window int   // bytes
}

// NewParams validates cfg for a network and derives the rate.
func NewParams(cfg Config, net config.Network) (*Params, error) {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("fixed_rate."+format, a...)) }
	bits := 0.0
	switch {
	case cfg.Coefficient != 0:
		if !(cfg.Coefficient > 0 && cfg.Coefficient <= 1000) {
			bad("coefficient = %v: must be in (0, 1000]", cfg.Coefficient)
		}
		if cfg.FairShareFlows < 1 || cfg.FairShareFlows > 1<<20 {
			bad("fair_share_flows = %d: must be in 1..%d with a coefficient", cfg.FairShareFlows, 1<<20)
		} else {
			bits = cfg.Coefficient * float64(net.LinkRate) / float64(cfg.FairShareFlows)
		}
	default:
		if !(cfg.Fraction > 0 && cfg.Fraction <= 1) {
			bad("fraction = %v: must be in (0, 1] (or set coefficient and fair_share_flows)", cfg.Fraction)
		}
		bits = cfg.Fraction * float64(net.LinkRate)
	}
	if !(cfg.WindowBDP == 0 || cfg.WindowBDP >= 0.1 && cfg.WindowBDP <= 1000) {
		bad("window_bdp = %v: must be 0 (no cap) or in 0.1..1000", cfg.WindowBDP)
	}
	if len(errs) == 0 && (bits < 8000 || bits > float64(net.LinkRate)) {
		bad("rate = %.0f bit/s: must be in 8kbit/s..link_rate (%d bit/s)", bits, net.LinkRate)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p := &Params{rate: int64(bits / 8), window: math.MaxInt32}
	if cfg.WindowBDP > 0 {
		p.window = int(max(cfg.WindowBDP*float64(net.BDP()), float64(net.MTU)))
	}
	return p, nil
}

// Rate returns the configured rate in bytes per second.
func (p *Params) Rate() int64 { return p.rate }

// FixedRate is one connection's controller: a constant pacing rate.
type FixedRate struct {
	p *Params
}

// New returns a controller pacing at p's rate.
func New(p *Params) *FixedRate { return &FixedRate{p: p} }

// OnAck ignores the feedback: the rate does not depend on congestion.
func (f *FixedRate) OnAck(cc.Ack) {}

// OnLoss ignores the loss: recovery resends the packet at the same rate.
func (f *FixedRate) OnLoss(cc.Loss) {}

// Window returns the cap on bytes in flight (no cap unless window_bdp is set).
func (f *FixedRate) Window() int { return f.p.window }

// PacingRate returns the configured rate in bytes per second.
func (f *FixedRate) PacingRate() int64 { return f.p.rate }

// Cost reports a fixed rate's footprint: the rate and the window, nothing computed.
func (f *FixedRate) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "fixed_rate", StateBytes: 0, GlobalBytes: 16, Ops: 0, IntegerOnly: true}
}
