// Package swift implements Swift (Kumar et al., "Swift: Delay is Simple and Effective
// for Congestion Control in the Datacenter", SIGCOMM 2020): a delay-target window
// controller whose target grows with the path's hop count and shrinks as the window
// grows (flow scaling), with additive increase per RTT, a multiplicative decrease
// proportional to the excess delay at most once per RTT, and pacing when the window is
// below one packet. The per-ACK path is integer-only (the flow-scaling square root is an
// integer square root); the constants are derived once per endpoint.
package swift

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"unsafe"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/hwprofile"
)

// Config holds Swift's parameters (YAML section "swift"); the defaults are the paper's.
type Config struct {
	// BaseTargetRTTs is the base target delay in base RTTs (default 1.25: a few
	// microseconds above the unloaded RTT, as the paper sets it).
	BaseTargetRTTs float64 `yaml:"base_target_rtts"`
	// HopScale is the target delay added per hop of the path, ns (default: base RTT / 6.55,
	// htsim's choice).
	HopScale config.Duration `yaml:"hop_scale"`
	// Hops is the path's hop count until SetHops says otherwise (default 0: no hop term).
	Hops int `yaml:"hops"`
	// FSRange is the flow-scaling range in base targets (paper: 5).
	FSRange float64 `yaml:"fs_range"`
	// FSMinCwnd is the window, in packets, at and below which flow scaling adds all of
	// FSRange (paper: 0.1).
	FSMinCwnd float64 `yaml:"fs_min_cwnd"`
	// FSMaxCwnd is the window, in packets, from which flow scaling adds nothing (paper: 100).
	FSMaxCwnd float64 `yaml:"fs_max_cwnd"`
	// AI is the additive increase in packets per RTT (paper: 1).
	AI float64 `yaml:"ai"`
	// Beta is the multiplicative-decrease gain (paper: 0.8).
	Beta float64 `yaml:"beta"`
	// MaxMDF caps one multiplicative decrease (paper: 0.5).
	MaxMDF float64 `yaml:"max_mdf"`
	// MinCwnd is the window floor in packets (paper: 0.001; below 1 the flow is paced).
	MinCwnd float64 `yaml:"min_cwnd"`
	// MaxWindowBDP caps the window in bandwidth-delay products (default 1.5).
	MaxWindowBDP float64 `yaml:"max_window_bdp"`
	// RetxResetThreshold is the number of consecutive timeouts after which the window
	// drops to MinCwnd (paper: 5).
	RetxResetThreshold int `yaml:"retx_reset_threshold"`
}

// DefaultConfig returns the paper's defaults.
func DefaultConfig() Config {
	return Config{BaseTargetRTTs: 1.25, FSRange: 5, FSMinCwnd: 0.1, FSMaxCwnd: 100, AI: 1,
		Beta: 0.8, MaxMDF: 0.5, MinCwnd: 0.001, MaxWindowBDP: 1.5, RetxResetThreshold: 5}
}

// Params are the constants derived once per endpoint; every connection shares them.
type Params struct {
	mtu        int64
	baseTarget int64 // ns
	hopScale   int64 // ns per hop
	hops       uint8
	fsRange    int64 // ns
	fsAlpha    int64 // ns x 256: fs = fsAlpha / (256 sqrt(cwnd pkts)) + fsBeta
	fsBeta     int64 // ns
	aiBytes    int64 // MTU x AI
	betaQ16    int64
	mdfQ16     int64 // 1 - max_mdf, Q16
	minCwnd    int64 // bytes
	maxCwnd    int64 // bytes
	initCwnd   int64 // bytes
	retxReset  uint8
	baseRTT    int64
}

// NewParams validates cfg for a network and derives the constants.
func NewParams(cfg Config, net config.Network) (*Params, error) {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("swift."+format, a...)) }
	in := func(name string, v, lo, hi float64) {
		if !(v >= lo && v <= hi) {
			bad("%s = %v: must be in %v..%v", name, v, lo, hi)
		}
	}
	in("base_target_rtts", cfg.BaseTargetRTTs, 1, 100)
	in("fs_range", cfg.FSRange, 0, 100)
	in("fs_min_cwnd", cfg.FSMinCwnd, 0.001, 1e6)
	if !(cfg.FSMaxCwnd > cfg.FSMinCwnd && cfg.FSMaxCwnd <= 1e6) {
		bad("fs_max_cwnd = %v: must be in (fs_min_cwnd (%v), 1e6]", cfg.FSMaxCwnd, cfg.FSMinCwnd)
	}
	in("ai", cfg.AI, 0.01, 100)
	in("beta", cfg.Beta, 0.01, 1)
	in("max_mdf", cfg.MaxMDF, 0.01, 0.99)
	in("min_cwnd", cfg.MinCwnd, 0.001, 1)
	in("max_window_bdp", cfg.MaxWindowBDP, 0.1, 100)
	if cfg.Hops < 0 || cfg.Hops > 32 {
		bad("hops = %d: must be in 0..32", cfg.Hops)
	}
	if cfg.HopScale < 0 || cfg.HopScale > 1_000_000 {
		bad("hop_scale = %v: must be in 0..1ms", cfg.HopScale)
	}
	if cfg.RetxResetThreshold < 1 || cfg.RetxResetThreshold > 255 {
		bad("retx_reset_threshold = %d: must be in 1..255", cfg.RetxResetThreshold)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	mtu := int64(net.MTU)
	bt := int64(cfg.BaseTargetRTTs * float64(net.BaseRTT))
	hs := int64(cfg.HopScale)
	if hs == 0 {
		hs = int64(float64(net.BaseRTT) / 6.55)
	}
	fsRange := cfg.FSRange * float64(bt)
	// fs(c) = alpha/sqrt(c) + beta with fs(fs_min) = fs_range and fs(fs_max) = 0.
	alpha := fsRange / (1/math.Sqrt(cfg.FSMinCwnd) - 1/math.Sqrt(cfg.FSMaxCwnd))
	p := &Params{
		mtu: mtu, baseTarget: bt, hopScale: hs, hops: uint8(cfg.Hops),
		fsRange: int64(fsRange), fsAlpha: int64(alpha * 256), fsBeta: int64(-alpha / math.Sqrt(cfg.FSMaxCwnd)),
		aiBytes: int64(cfg.AI * float64(mtu)), betaQ16: int64(cfg.Beta * 65536), mdfQ16: int64((1 - cfg.MaxMDF) * 65536),
		minCwnd: max(int64(cfg.MinCwnd*float64(mtu)), 1), retxReset: uint8(cfg.RetxResetThreshold), baseRTT: net.BaseRTT,
	}
	p.maxCwnd = max(int64(cfg.MaxWindowBDP*float64(net.BDP())), mtu)
	if p.maxCwnd > 1<<30 {
		return nil, fmt.Errorf("swift.max_window_bdp = %v: the window (%d bytes) must be at most 1 GiB", cfg.MaxWindowBDP, p.maxCwnd)
	}
	p.initCwnd = min(max(net.BDP(), mtu), p.maxCwnd)
	return p, nil
}

// state is Swift's per-flow state as a NIC holds it; Cost().StateBytes is its size.
type state struct {
	cwnd    uint32 // bytes (below one MTU the flow is paced)
	lastDec uint32 // ns (low 32 bits of the clock): time of the last decrease
	rtt     uint32 // ns: the latest RTT sample
	hops    uint8
	retx    uint8 // consecutive timeouts
	flags   uint8 // bit 0: a decrease has happened (lastDec valid)
	_       uint8
}

const stateBytes = int(unsafe.Sizeof(state{})) // pinned by cctest.TestEveryControllerHonoursContract

// Swift is one connection's Swift controller.
type Swift struct {
	p  *Params
	s  state
	st cc.Stats
}

// New returns a Swift controller for one flow, starting at one BDP.
func New(p *Params) *Swift {
	return &Swift{p: p, s: state{cwnd: uint32(p.initCwnd), hops: p.hops, rtt: uint32(p.baseRTT)}}
}

// SetHops sets the path's hop count (the target's hop-scaling term).
func (w *Swift) SetHops(n int) { w.s.hops = uint8(min(max(n, 0), 255)) }

// isqrt is the integer square root (bit by bit, at most 32 steps).
func isqrt(x uint64) uint64 {
	var r uint64
	b := uint64(1) << ((bits.Len64(x) + 1) &^ 1)
	for ; b != 0; b >>= 2 {
		if x >= r+b {
			x -= r + b
			r = r>>1 + b
		} else {
			r >>= 1
		}
	}
	return r
}

// Target returns the current target delay, ns: base + hops x h + flow scaling.
func (w *Swift) Target() int64 {
	p := w.p
	t := p.baseTarget + int64(w.s.hops)*p.hopScale
	// sqrt(cwnd in packets) x 256 = sqrt(cwnd x 65536 / mtu).
	sq := int64(isqrt(uint64(w.s.cwnd) << 16 / uint64(p.mtu)))
	var fs int64
	if sq == 0 {
		fs = p.fsRange
	} else {
		fs = min(max(p.fsAlpha/sq+p.fsBeta, 0), p.fsRange)
	}
	return t + fs
}

// canDecrease: the last decrease is at least one RTT old.
func (w *Swift) canDecrease(now int64) bool {
	return w.s.flags&1 == 0 || uint32(now)-w.s.lastDec >= w.s.rtt
}

func (w *Swift) decreased(now int64) {
	w.s.lastDec, w.s.flags = uint32(now), w.s.flags|1
	w.st.Cuts++
}

// OnAck applies additive increase below the target and, above it, a multiplicative
// decrease by beta x (delay - target)/delay, capped at max_mdf, at most once per RTT.
func (w *Swift) OnAck(a cc.Ack) {
	s, p := &w.s, w.p
	s.retx = 0
	if a.RTT <= 0 {
		return
	}
	s.rtt = uint32(min(a.RTT, 1<<31))
	cw := int64(s.cwnd)
	target := w.Target()
	if a.RTT < target {
		if cw >= p.mtu {
			cw += p.aiBytes * int64(a.Bytes) / cw
		} else {
			cw += p.aiBytes * int64(a.Bytes) / p.mtu
		}
	} else if w.canDecrease(a.Now) {
		f := p.betaQ16 * (a.RTT - target) / a.RTT // Q16 cut
		cw = max(cw*(65536-f)>>16, cw*p.mdfQ16>>16)
		w.decreased(a.Now)
	}
	s.cwnd = uint32(min(max(cw, p.minCwnd), p.maxCwnd))
}

// OnLoss: a timeout counts toward the reset threshold (window to the floor) and
// otherwise cuts by max_mdf once per RTT, as fast recovery (trim or SACK gap) does.
func (w *Swift) OnLoss(l cc.Loss) {
	s, p := &w.s, w.p
	cw := int64(s.cwnd)
	if l.Cause == cc.LossTimeout {
		s.retx = min(s.retx+1, 255)
		if s.retx >= p.retxReset {
			s.cwnd = uint32(p.minCwnd)
			w.decreased(l.Now)
			return
		}
	}
	if w.canDecrease(l.Now) {
		cw = cw * p.mdfQ16 >> 16
		w.decreased(l.Now)
	}
	s.cwnd = uint32(min(max(cw, p.minCwnd), p.maxCwnd))
}

// Window returns the congestion window in bytes, at least one MTU: below one packet
// Swift sends one packet at a time, paced (PacingRate).
func (w *Swift) Window() int { return int(max(int64(w.s.cwnd), w.p.mtu)) }

// Cwnd returns the exact window in bytes (may be below one MTU).
func (w *Swift) Cwnd() int { return int(w.s.cwnd) }

// PacingRate is 0 while the window is at least one packet; below, it spaces packets by
// RTT/cwnd: cwnd bytes per RTT.
func (w *Swift) PacingRate() int64 {
	if int64(w.s.cwnd) >= w.p.mtu {
		return 0
	}
	return int64(w.s.cwnd) * 1_000_000_000 / int64(max(w.s.rtt, 1))
}

// CCStats reports the controller's counters (cc.StatsReporter).
func (w *Swift) CCStats() cc.Stats { return w.st }

// Cost reports Swift's footprint: 16 bytes of state, integer-only; the worst case per
// ACK is the target (a 32-step integer square root) and the decrease's division.
func (w *Swift) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "swift", StateBytes: stateBytes, GlobalBytes: 15 * 8, Ops: 120, IntegerOnly: true}
}
