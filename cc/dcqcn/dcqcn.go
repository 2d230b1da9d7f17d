// Package dcqcn implements DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA
// Deployments", SIGCOMM 2015), a rate-based controller: a congestion notification
// (here a CE-marked ACK, at most one per CNP interval, or a lost packet) sets the target
// rate to the current rate and cuts the current rate by alpha/2; alpha decays every K
// without notification; the rate recovers through fast recovery, additive increase
// and hyper increase stages driven by a timer and a byte counter. The timers are
// evaluated when feedback arrives (from the ACK's clock), so the controller needs no
// timer hook. Integer-only: rates in kB/s, alpha in Q16.
package dcqcn

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/hwprofile"
)

// Config holds DCQCN's parameters (YAML section "dcqcn"); the defaults are the paper's.
type Config struct {
	// GShift sets the alpha gain g = 2^-GShift (paper: 1/256, 8).
	GShift int `yaml:"g_shift"`
	// AlphaTimer is K, the alpha decay period without notifications (paper: 55us).
	AlphaTimer config.Duration `yaml:"alpha_timer"`
	// RateTimer is T, the rate-increase timer (paper: 55us).
	RateTimer config.Duration `yaml:"rate_timer"`
	// ByteCounter is B, the bytes per rate-increase event (paper: 10 MB).
	ByteCounter int64 `yaml:"byte_counter"`
	// FastRecoverySteps is F, the fast-recovery stages (paper: 5).
	FastRecoverySteps int `yaml:"fast_recovery_steps"`
	// AIRate is R_AI, the additive increase per stage (paper: 40 Mbit/s).
	AIRate config.Rate `yaml:"ai_rate"`
	// HAIRate is R_HAI, the hyper-increase step (default 10 x R_AI).
	HAIRate config.Rate `yaml:"hai_rate"`
	// CNPInterval is the least time between two notifications a flow reacts to (paper: 50us).
	CNPInterval config.Duration `yaml:"cnp_interval"`
	// MinRate is the rate floor (default 10 Mbit/s).
	MinRate config.Rate `yaml:"min_rate"`
	// WindowBDP caps the bytes in flight, in bandwidth-delay products at line rate (default 2).
	WindowBDP float64 `yaml:"window_bdp"`
}

// DefaultConfig returns the paper's defaults.
func DefaultConfig() Config {
	return Config{GShift: 8, AlphaTimer: 55_000, RateTimer: 55_000, ByteCounter: 10_000_000,
		FastRecoverySteps: 5, AIRate: 40_000_000, HAIRate: 400_000_000, CNPInterval: 50_000,
		MinRate: 10_000_000, WindowBDP: 2}
}

// Params are the constants derived once per endpoint.
type Params struct {
	gShift                 uint
	k, t, cnp              int64 // ns
	b                      int64 // bytes
	f                      uint8
	ai, hai, line, minRate int64 // kB/s
	window                 int64 // bytes
}

// NewParams validates cfg for a network and derives the constants.
func NewParams(cfg Config, net config.Network) (*Params, error) {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("dcqcn."+format, a...)) }
	if cfg.GShift < 1 || cfg.GShift > 12 {
		bad("g_shift = %d: must be in 1..12", cfg.GShift)
	}
	for _, d := range []struct {
		name string
		v    config.Duration
	}{{"alpha_timer", cfg.AlphaTimer}, {"rate_timer", cfg.RateTimer}, {"cnp_interval", cfg.CNPInterval}} {
		if d.v < 1000 || d.v > 1_000_000_000 {
			bad("%s = %v: must be in 1us..1s", d.name, d.v)
		}
	}
	if cfg.ByteCounter < int64(net.MTU) || cfg.ByteCounter > 1<<31 {
		bad("byte_counter = %d: must be in mtu (%d)..%d bytes", cfg.ByteCounter, net.MTU, int64(1<<31))
	}
	if cfg.FastRecoverySteps < 1 || cfg.FastRecoverySteps > 100 {
		bad("fast_recovery_steps = %d: must be in 1..100", cfg.FastRecoverySteps)
	}
	line := net.LinkRate
	for _, r := range []struct {
		name string
		v    config.Rate
	}{{"ai_rate", cfg.AIRate}, {"hai_rate", cfg.HAIRate}, {"min_rate", cfg.MinRate}} {
		if r.v < 8000 || int64(r.v) > line {
			bad("%s = %v: must be in 8kbit/s..link_rate (%d bit/s)", r.name, r.v, line)
		}
	}
	if !(cfg.WindowBDP >= 0.5 && cfg.WindowBDP <= 100) {
		bad("window_bdp = %v: must be in 0.5..100", cfg.WindowBDP)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	kBps := func(bits config.Rate) int64 { return int64(bits) / 8000 }
	p := &Params{gShift: uint(cfg.GShift), k: int64(cfg.AlphaTimer), t: int64(cfg.RateTimer), cnp: int64(cfg.CNPInterval),
		b: cfg.ByteCounter, f: uint8(cfg.FastRecoverySteps), ai: kBps(cfg.AIRate), hai: kBps(cfg.HAIRate),
		line: line / 8000, minRate: kBps(cfg.MinRate)}
	p.window = max(int64(cfg.WindowBDP*float64(net.BDP())), int64(net.MTU))
	if p.line > 1<<31 {
		return nil, fmt.Errorf("dcqcn: link_rate %d bit/s above the 17 Tbit/s the 32-bit rate holds", line)
	}
	return p, nil
}

const one = 1 << 16

// state is DCQCN's per-flow state as a NIC holds it; Cost().StateBytes is its size.
type state struct {
	rc, rt    uint32 // current and target rate, kB/s
	alpha     uint32 // Q16
	lastCNP   uint32 // ns (low 32 bits): last notification reacted to
	lastAlpha uint32 // ns: last alpha decay (or notification)
	lastTimer uint32 // ns: last rate-timer expiry (or notification)
	bytes     uint32 // bytes acknowledged toward the byte counter
	tcnt      uint8  // rate-timer stages since the last notification
	bcnt      uint8  // byte-counter stages since the last notification
	flags     uint8  // bit 0: a notification was seen (lastCNP valid)
	_         uint8
}

const stateBytes = int(unsafe.Sizeof(state{})) // pinned by cctest.TestEveryControllerHonoursContract

// DCQCN is one connection's controller.
type DCQCN struct {
	p  *Params
	s  state
	st cc.Stats
}

// New returns a DCQCN controller for one flow, starting at line rate with alpha = 1.
func New(p *Params) *DCQCN {
	return &DCQCN{p: p, s: state{rc: uint32(p.line), rt: uint32(p.line), alpha: one}}
}

// increase runs one rate-increase event: fast recovery while both counters are below
// F, additive increase once one of them reached F, hyper increase once both did.
func (d *DCQCN) increase() {
	s, p := &d.s, d.p
	rt := int64(s.rt)
	hi, lo := max(s.tcnt, s.bcnt), min(s.tcnt, s.bcnt)
	switch {
	case hi < p.f:
	case lo >= p.f:
		rt += int64(lo-p.f+1) * p.hai
	default:
		rt += p.ai
	}
	rt = min(rt, p.line)
	s.rt = uint32(rt)
	s.rc = uint32(min((rt+int64(s.rc))/2, p.line))
}

// maxSteps bounds the alpha decays and the rate-timer expiries applied per event (the
// NIC's per-decision budget); older expiries are dropped after an idle period.
const maxSteps = 4

// advance applies the alpha decays and rate-timer expiries due by now.
func (d *DCQCN) advance(now int64) {
	s, p := &d.s, d.p
	for i := 0; i < maxSteps && int64(uint32(now)-s.lastAlpha) >= p.k; i++ {
		s.alpha -= s.alpha >> p.gShift
		s.lastAlpha += uint32(p.k)
	}
	if int64(uint32(now)-s.lastAlpha) >= p.k {
		s.lastAlpha = uint32(now)
	}
	for i := 0; i < maxSteps && int64(uint32(now)-s.lastTimer) >= p.t; i++ {
		s.lastTimer += uint32(p.t)
		s.tcnt = min(s.tcnt+1, 255)
		d.increase()
	}
	if int64(uint32(now)-s.lastTimer) >= p.t {
		s.lastTimer = uint32(now)
	}
}

// notify reacts to a congestion notification, at most once per CNP interval.
func (d *DCQCN) notify(now int64) {
	s, p := &d.s, d.p
	if s.flags&1 != 0 && int64(uint32(now)-s.lastCNP) < p.cnp {
		return
	}
	s.flags |= 1
	s.lastCNP, s.lastAlpha, s.lastTimer = uint32(now), uint32(now), uint32(now)
	s.rt = s.rc
	s.rc = uint32(max(int64(s.rc)-int64(s.rc)*int64(s.alpha)>>17, p.minRate))
	s.alpha += (one - s.alpha) >> p.gShift
	s.tcnt, s.bcnt, s.bytes = 0, 0, 0
	d.st.Cuts++
}

// OnAck advances the timers, counts the acknowledged bytes toward the byte counter and
// treats a CE-marked ACK as a CNP.
func (d *DCQCN) OnAck(a cc.Ack) {
	d.advance(a.Now)
	if a.CE || a.CECount > 0 {
		d.notify(a.Now)
		return
	}
	s, p := &d.s, d.p
	s.bytes += uint32(a.Bytes)
	for int64(s.bytes) >= p.b {
		s.bytes -= uint32(p.b)
		s.bcnt = min(s.bcnt+1, 255)
		d.increase()
	}
}

// OnLoss treats a lost packet as a notification (the paper assumes a lossless fabric).
func (d *DCQCN) OnLoss(l cc.Loss) {
	d.advance(l.Now)
	d.notify(l.Now)
}

// Window caps the bytes in flight at window_bdp BDPs: DCQCN is rate-based.
func (d *DCQCN) Window() int { return int(d.p.window) }

// PacingRate returns the current rate in bytes per second.
func (d *DCQCN) PacingRate() int64 { return int64(d.s.rc) * 1000 }

// Alpha returns alpha as a fraction (for tests and traces).
func (d *DCQCN) Alpha() float64 { return float64(d.s.alpha) / one }

// TargetRate returns the target rate in bytes per second.
func (d *DCQCN) TargetRate() int64 { return int64(d.s.rt) * 1000 }

// CCStats reports the controller's counters (cc.StatsReporter).
func (d *DCQCN) CCStats() cc.Stats { return d.st }

// Cost reports DCQCN's footprint: 32 bytes of state, integer-only; the worst case per
// ACK is a notification or a few timer expiries with their increase events.
func (d *DCQCN) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "dcqcn", StateBytes: stateBytes, GlobalBytes: 11 * 8, Ops: 90, IntegerOnly: true}
}
