package smartt

import (
	"errors"
	"fmt"
	"math"

	"github.com/smartt-transport/smartt/config"
)

// Config holds SMaRTT's parameters. Zero values of the derived fields (marked "0:")
// are computed from the network (link rate, base RTT, MTU) as the paper prescribes;
// the others start at the paper's values in DefaultConfig.
type Config struct {
	// FixedPoint selects the integer implementation (no floating point per ACK), the
	// one a NIC's datapath cores could run; same decisions as the float one within rounding.
	FixedPoint bool `yaml:"fixed_point"`
	// BaseRTT is the RTT of an empty path, ns (0: the network's base_rtt).
	BaseRTT config.Duration `yaml:"base_rtt"`
	// BaseRTTPerHop gives the base RTT by hop count (index = hops, the last entry for
	// longer paths); a connection picks its entry with SetHops. Empty: BaseRTT for all.
	BaseRTTPerHop []config.Duration `yaml:"base_rtt_per_hop"`
	// LearnBaseRTT replaces the configured base RTT by the minimum RTT the flow has
	// seen (from its first sample on), like Swift; the target RTT follows it.
	LearnBaseRTT bool `yaml:"learn_base_rtt"`
	// LowerBaseRTT starts each flow at its configured (or per-hop) base RTT and lowers it
	// to the minimum RTT seen, never raising it: the REPS artifact's htsim rule (ignored
	// with LearnBaseRTT).
	LowerBaseRTT bool `yaml:"lower_base_rtt"`
	// TargetRTT fixes the target RTT, ns (0: TargetRatio x base RTT, per flow).
	TargetRTT config.Duration `yaml:"target_rtt"`
	// TargetRatio is the target RTT as a multiple of the base RTT (paper: 1.5).
	TargetRatio float64 `yaml:"target_ratio"`
	// FI is the fair-increase constant before gamma scaling (paper: 0.25).
	FI float64 `yaml:"fi"`
	// FD is the fair-decrease constant, not scaled (paper: 0.8).
	FD float64 `yaml:"fd"`
	// MI is the multiplicative-increase constant before gamma scaling
	// (0: base RTT / (target RTT - base RTT), i.e. 2 at the default target).
	MI float64 `yaml:"mi"`
	// MD is the multiplicative-decrease constant, not scaled (paper: 2); it is doubled
	// when the network does not trim (timeouts replace trims).
	MD float64 `yaml:"md"`
	// QAScaling scales the bytes acknowledged in the last target RTT into the window
	// QuickAdapt sets (paper: 0.8, so the RTT settles near 1.2 base RTTs).
	QAScaling float64 `yaml:"qa_scaling"`
	// FastIncreaseK is the number of MTUs FastIncrease adds per ACK (paper: 2).
	FastIncreaseK int `yaml:"fast_increase_k"`
	// FastIncreaseTolerance is how far above the base RTT an RTT still counts as
	// "at base RTT" for FastIncrease, ns (0: base RTT / 16).
	FastIncreaseTolerance config.Duration `yaml:"fast_increase_tolerance"`
	// WTDAlpha is the EWMA weight of Wait-To-Decrease's average of CE marks (1/8).
	WTDAlpha float64 `yaml:"wtd_alpha"`
	// WTDThreshold: ECN-driven decreases only once the average reaches it (paper: 0.25).
	WTDThreshold float64 `yaml:"wtd_threshold"`
	// Gamma scales FI and MI (0: BDP / config.ReferenceBDP).
	Gamma float64 `yaml:"gamma"`
	// MinWindow is the smallest window, bytes (0: one MTU).
	MinWindow int `yaml:"min_window"`
	// MaxWindow is the largest window, bytes (0: 1.25 BDP).
	MaxWindow int `yaml:"max_window"`
	// InitialWindow is a new flow's window, bytes (0: one BDP, i.e. line rate at once).
	InitialWindow int `yaml:"initial_window"`
	// ReactEvery reacts once per this many ACKs, as one ACK of their summed bytes
	// carrying the last one's signals (paper: 1 is best, 50 is within 5 %).
	ReactEvery int `yaml:"react_every"`
	// DisableQuickAdapt, DisableFastIncrease and DisableWTD switch a mechanism off (ablation).
	DisableQuickAdapt   bool `yaml:"disable_quick_adapt"`
	DisableFastIncrease bool `yaml:"disable_fast_increase"`
	DisableWTD          bool `yaml:"disable_wtd"`
	// NoTimeoutCut: a retransmission timeout neither cuts the window nor arms QuickAdapt
	// (the REPS artifact's htsim reacts to NACKs only); default false, the paper's
	// Algorithm 1 (a timeout cuts like a trim).
	NoTimeoutCut bool `yaml:"no_timeout_cut"`
	// CapDecrease caps MD and FD together at one MTU per ACK (the REPS artifact's htsim);
	// default false, the paper's (MD capped at the ACK's size, FD after it uncapped).
	CapDecrease bool `yaml:"cap_decrease"`
	// Signals replaces SMaRTT by the single-signal window controller its paper compares
	// with in Fig. 2: "ecn" (cut by half the ACK's bytes per CE mark) or "delay" (cut by
	// half the ACK's bytes times (rtt - target) / rtt when the RTT is above the target),
	// otherwise the fair increase; no QuickAdapt, fast increase or Wait-To-Decrease.
	// "" (default) or "both": SMaRTT. Float path only (not fixed_point).
	Signals string `yaml:"signals"`
}

// REPSArtifactConfig returns the constants of SMaRTT in the REPS artifact's htsim
// (fast increase 1 MTU within 1 us of the base RTT, multiplicative increase 2, fair
// increase 0.02, fair decrease 0.5, MD 1, WTD EWMA 0.05 with threshold 0.3, no window
// cut on a timeout, MD+FD capped at one MTU per ACK, the base RTT lowered to the
// minimum seen), for scenarios that compare with that simulator.
func REPSArtifactConfig() Config {
	c := DefaultConfig()
	c.FastIncreaseK, c.FastIncreaseTolerance = 1, 1000
	c.MI, c.FI, c.FD, c.MD = 2, 0.02, 0.5, 1
	c.WTDAlpha, c.WTDThreshold = 0.05, 0.3
	c.NoTimeoutCut, c.CapDecrease, c.LowerBaseRTT = true, true, true
	return c
}

// DefaultConfig returns the paper's parameters; the network-derived ones are left 0.
func DefaultConfig() Config {
	return Config{
		TargetRatio:   1.5,
		FI:            0.25,
		FD:            0.8,
		MD:            2,
		QAScaling:     0.8,
		FastIncreaseK: 2,
		WTDAlpha:      0.125,
		WTDThreshold:  0.25,
		ReactEvery:    1,
	}
}

// Config.Signals values in Params.
const (
	sigBoth = iota
	sigECN
	sigDelay
)

// Limits of the fixed-point representation (windows are Q24.8 bytes in 32 bits,
// times 32-bit nanoseconds).
const (
	maxWindowLimit = 1<<24 - 1     // bytes
	maxRTTLimit    = 1_000_000_000 // ns, base and target RTT
	maxGain        = 1 << 20       // fi, mi, fd, md, qa_scaling upper bound
	maxHops        = 32
)

// Params are the constants shared by every flow of an endpoint (the paper's "global"
// state), derived once from Config, the network and whether it trims.
type Params struct {
	MTU       int
	BDP       int64
	BaseRTT   int64 // ns
	TargetRTT int64 // ns; 0: ratio x per-flow base RTT
	Trimming  bool
	Gamma     float64
	FI, FD    float64 // FI already scaled by gamma
	MI, MD    float64 // MI scaled by gamma, MD doubled without trimming
	QAScaling float64
	K         int
	FITol     int64 // ns
	Alpha     float64
	Threshold float64
	MinWindow int
	MaxWindow int
	InitWin   int
	Every     int
	Learn     bool
	Lower     bool // LowerBaseRTT
	NoTOCut   bool // NoTimeoutCut
	CapDec    bool // CapDecrease
	PerHop    []int64
	NoQA      bool
	NoFI      bool
	NoWTD     bool
	Signals   uint8 // sigBoth (SMaRTT), sigECN, sigDelay (Config.Signals)

	ratioQ16 uint64 // target ratio, Q16
	fixed    fixedParams
}

// fixedParams are the integer constants of the fixed-point path: gains in Q32.
type fixedParams struct {
	fdQ32, mdQ32, fiQ32, miQ32, qaQ32 uint64
	alphaQ32                          int64
	thrQ31                            uint32
	kQ8                               uint32 // k x mtu, Q8
	minQ8, maxQ8, initQ8              uint32
}

// NewParams validates cfg against the network and derives the shared constants.
// trimming says whether the network trims packets (transport.Config.Trimming).
func NewParams(cfg Config, net config.Network, trimming bool) (*Params, error) {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("smartt."+format, a...)) }
	if err := net.Validate(); err != nil {
		return nil, err
	}
	brtt := int64(cfg.BaseRTT)
	if brtt == 0 {
		brtt = net.BaseRTT
	}
	if brtt < 100 || brtt > maxRTTLimit {
		bad("base_rtt = %d ns: must be in 100..%d", brtt, maxRTTLimit)
	}
	if len(cfg.BaseRTTPerHop) > maxHops {
		bad("base_rtt_per_hop: %d entries, at most %d", len(cfg.BaseRTTPerHop), maxHops)
	}
	perHop := make([]int64, len(cfg.BaseRTTPerHop))
	for i, d := range cfg.BaseRTTPerHop {
		if d < 100 || d > maxRTTLimit {
			bad("base_rtt_per_hop[%d] = %d ns: must be in 100..%d", i, d, maxRTTLimit)
		}
		perHop[i] = int64(d)
	}
	if !(cfg.TargetRatio > 1 && cfg.TargetRatio <= 16) {
		bad("target_ratio = %v: must be in (1, 16]", cfg.TargetRatio)
	}
	trtt := int64(cfg.TargetRTT)
	if trtt != 0 && (trtt <= brtt || trtt > maxRTTLimit) {
		bad("target_rtt = %d ns: must be 0 (derived) or in (base_rtt = %d, %d]", trtt, brtt, maxRTTLimit)
	}
	gainOK := func(name string, v float64, lo float64) {
		if !(v >= lo && v <= maxGain) || math.IsNaN(v) {
			bad("%s = %v: must be in [%v, %d]", name, v, lo, maxGain)
		}
	}
	gainOK("fi", cfg.FI, 0)
	gainOK("fd", cfg.FD, 0)
	gainOK("mi", cfg.MI, 0)
	gainOK("md", cfg.MD, 0)
	if !(cfg.QAScaling > 0 && cfg.QAScaling <= 4) {
		bad("qa_scaling = %v: must be in (0, 4]", cfg.QAScaling)
	}
	if cfg.FastIncreaseK < 0 || cfg.FastIncreaseK > 64 {
		bad("fast_increase_k = %d: must be in 0..64", cfg.FastIncreaseK)
	}
	if cfg.FastIncreaseTolerance < 0 || cfg.FastIncreaseTolerance > maxRTTLimit {
		bad("fast_increase_tolerance = %d ns: must be in 0..%d", cfg.FastIncreaseTolerance, maxRTTLimit)
	}
	if !(cfg.WTDAlpha > 0 && cfg.WTDAlpha <= 1) {
		bad("wtd_alpha = %v: must be in (0, 1]", cfg.WTDAlpha)
	}
	if !(cfg.WTDThreshold >= 0 && cfg.WTDThreshold <= 1) {
		bad("wtd_threshold = %v: must be in [0, 1]", cfg.WTDThreshold)
	}
	bdp := net.BDP()
	gamma := cfg.Gamma
	if gamma == 0 {
		gamma = float64(bdp) / config.ReferenceBDP
	}
	if !(gamma > 0 && gamma <= 1024) {
		bad("gamma = %v: must be 0 (derived) or in (0, 1024]", gamma)
	}
	minW, maxW, initW := cfg.MinWindow, cfg.MaxWindow, cfg.InitialWindow
	if minW == 0 {
		minW = net.MTU
	}
	if maxW == 0 {
		maxW = int(bdp + bdp/4)
	}
	if initW == 0 {
		initW = int(bdp)
	}
	initW = min(max(initW, minW), maxW)
	if minW < 1 || maxW < minW || maxW > maxWindowLimit {
		bad("window bounds [min_window %d, max_window %d]: need 1 <= min <= max <= %d bytes (max defaults to 1.25 BDP = %d)",
			minW, maxW, maxWindowLimit, bdp+bdp/4)
	}
	if cfg.InitialWindow < 0 {
		bad("initial_window = %d: must be >= 0", cfg.InitialWindow)
	}
	if cfg.ReactEvery < 1 || cfg.ReactEvery > 255 {
		bad("react_every = %d: must be in 1..255", cfg.ReactEvery)
	}
	signals := uint8(sigBoth)
	switch cfg.Signals {
	case "", "both":
	case "ecn":
		signals = sigECN
	case "delay":
		signals = sigDelay
	default:
		bad("signals = %q: must be both, ecn or delay", cfg.Signals)
	}
	if signals != sigBoth && cfg.FixedPoint {
		bad("signals = %q needs fixed_point: false (the single-signal controllers are float only)", cfg.Signals)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	mi := cfg.MI
	if mi == 0 {
		// brtt / (trtt - brtt): the largest mi that adds at most one MTU per RTT.
		if trtt != 0 {
			mi = float64(brtt) / float64(trtt-brtt)
		} else {
			mi = 1 / (cfg.TargetRatio - 1)
		}
	}
	md := cfg.MD
	if !trimming {
		md *= 2
	}
	tol := int64(cfg.FastIncreaseTolerance)
	if tol == 0 {
		tol = brtt / 16
	}
	p := &Params{
		MTU: net.MTU, BDP: bdp, BaseRTT: brtt, TargetRTT: trtt, Trimming: trimming,
		Gamma: gamma, FI: cfg.FI * gamma, FD: cfg.FD, MI: mi * gamma, MD: md,
		QAScaling: cfg.QAScaling, K: cfg.FastIncreaseK, FITol: tol,
		Alpha: cfg.WTDAlpha, Threshold: cfg.WTDThreshold,
		MinWindow: minW, MaxWindow: maxW, InitWin: initW, Every: cfg.ReactEvery,
		Learn: cfg.LearnBaseRTT, PerHop: perHop,
		Lower: cfg.LowerBaseRTT, NoTOCut: cfg.NoTimeoutCut, CapDec: cfg.CapDecrease,
		NoQA: cfg.DisableQuickAdapt, NoFI: cfg.DisableFastIncrease, NoWTD: cfg.DisableWTD,
		Signals:  signals,
		ratioQ16: uint64(math.Round(cfg.TargetRatio * 65536)),
	}
	q32 := func(v float64) uint64 { return uint64(math.Round(v * (1 << 32))) }
	p.fixed = fixedParams{
		fdQ32: q32(p.FD), mdQ32: q32(p.MD), fiQ32: q32(p.FI), miQ32: q32(p.MI), qaQ32: q32(p.QAScaling),
		alphaQ32: int64(q32(p.Alpha)),
		thrQ31:   uint32(min(math.Round(p.Threshold*(1<<31)), 1<<31)),
		kQ8:      uint32(p.K * p.MTU << 8),
		minQ8:    uint32(minW) << 8, maxQ8: uint32(maxW) << 8, initQ8: uint32(initW) << 8,
	}
	return p, nil
}

// baseRTT returns the base RTT of a flow on a path of hop index hop (before learning).
func (p *Params) baseRTT(hop uint32) int64 {
	if n := len(p.PerHop); n > 0 {
		return p.PerHop[min(int(hop), n-1)]
	}
	return p.BaseRTT
}

// target returns the target RTT for a flow whose base RTT is brtt; integer arithmetic,
// shared by both implementations so that they compare RTTs against the same value.
func (p *Params) target(brtt int64) int64 {
	if p.TargetRTT != 0 {
		return p.TargetRTT
	}
	return int64(uint64(brtt) * p.ratioQ16 >> 16)
}
