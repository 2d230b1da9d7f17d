// Package nscc implements the Ultra Ethernet Consortium's network-signal congestion
// control (NSCC) as the UEC reference simulator (htsim) runs it, with the constants of
// SPEC section 8: four quadrants of (ECN, queueing delay vs target) per ACK, increases
// accumulated and applied once per adjust period, a multiplicative decrease at most
// once per base RTT, fast increase near an empty queue and QuickAdapt gated on the
// bytes achieved in the last window. The per-ACK path is integer-only.
package nscc

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/hwprofile"
)

// Config holds NSCC's parameters (YAML section "nscc"); the defaults are htsim's.
type Config struct {
	// TargetRTTs is the target queueing delay in base RTTs (0: 0.75 with trimming, 1 without).
	TargetRTTs float64 `yaml:"target_rtts"`
	// Gamma is the multiplicative-decrease gain (0.8); one decrease cuts at most half.
	Gamma float64 `yaml:"gamma"`
	// FairIncrease is the fair increase in MSS x a per RTT (5).
	FairIncrease float64 `yaml:"fair_increase"`
	// PropIncrease is the proportional-increase gain alpha in MSS x a x b per target (4).
	PropIncrease float64 `yaml:"prop_increase"`
	// Eta is the increase per adjust period in MSS x a (0.15).
	Eta float64 `yaml:"eta"`
	// FastIncrease is the fast-increase scale in a per acknowledged byte (0.25).
	FastIncrease float64 `yaml:"fast_increase"`
	// QAThreshold triggers QuickAdapt when the queueing delay exceeds it, in targets (4).
	QAThreshold float64 `yaml:"qa_threshold"`
	// QAGateShift gates QuickAdapt to windows that achieved less than maxwnd >> shift (3: 1/8).
	QAGateShift int `yaml:"qa_gate_shift"`
	// AdjustMTUs is the acknowledged bytes, in MTUs, after which the accumulated
	// increase is applied (8); it is also applied once per base RTT.
	AdjustMTUs int `yaml:"adjust_mtus"`
	// MaxWindowBDP is maxwnd in bandwidth-delay products (1.5).
	MaxWindowBDP float64 `yaml:"max_window_bdp"`
	// DisableQuickAdapt turns QuickAdapt off.
	DisableQuickAdapt bool `yaml:"disable_quick_adapt"`
}

// DefaultConfig returns htsim's constants (SPEC section 8).
func DefaultConfig() Config {
	return Config{Gamma: 0.8, FairIncrease: 5, PropIncrease: 4, Eta: 0.15, FastIncrease: 0.25,
		QAThreshold: 4, QAGateShift: 3, AdjustMTUs: 8, MaxWindowBDP: 1.5}
}

// Params are the constants derived once per endpoint; every connection shares them.
type Params struct {
	mtu, baseRTT, target int64 // bytes, ns, ns
	alphaQ16             int64 // proportional gain: bytes of inc per acked byte per ns, Q16
	fiQ16                int64 // fair increase per acked byte, Q16 (inc units)
	eta                  int64 // bytes per adjust period
	fastQ16              int64 // fast increase per acked byte, Q16
	gammaQ16             int64
	qaThresh             int64 // ns of queueing delay
	qaGate               int64 // bytes
	adjustBytes          int64
	minW, maxW           int64
	noQA                 bool
}

// NewParams validates cfg for a network and derives the constants; trimming selects
// the default target.
func NewParams(cfg Config, net config.Network, trimming bool) (*Params, error) {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("nscc."+format, a...)) }
	in := func(name string, v, lo, hi float64) {
		if !(v >= lo && v <= hi) {
			bad("%s = %v: must be in %v..%v", name, v, lo, hi)
		}
	}
	if cfg.TargetRTTs != 0 {
		in("target_rtts", cfg.TargetRTTs, 0.05, 10)
	}
	in("gamma", cfg.Gamma, 0.01, 1)
	in("fair_increase", cfg.FairIncrease, 0, 100)
	in("prop_increase", cfg.PropIncrease, 0, 100)
	in("eta", cfg.Eta, 0, 100)
	in("fast_increase", cfg.FastIncrease, 0, 10)
	in("qa_threshold", cfg.QAThreshold, 1, 100)
	in("max_window_bdp", cfg.MaxWindowBDP, 0.1, 100)
	if cfg.QAGateShift < 0 || cfg.QAGateShift > 16 {
		bad("qa_gate_shift = %d: must be in 0..16", cfg.QAGateShift)
	}
	if cfg.AdjustMTUs < 1 || cfg.AdjustMTUs > 1024 {
		bad("adjust_mtus = %d: must be in 1..1024", cfg.AdjustMTUs)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	tr := cfg.TargetRTTs
	if tr == 0 {
		tr = 1
		if trimming {
			tr = 0.75
		}
	}
	mtu, bdp := float64(net.MTU), float64(net.BDP())
	target := tr * float64(net.BaseRTT)
	a := bdp / (100e9 / 8 * 12e-6) // BDP / (100 Gbit/s x 12 us)
	b := target / 12_000
	p := &Params{
		mtu: int64(net.MTU), baseRTT: net.BaseRTT, target: int64(target),
		alphaQ16:    int64(cfg.PropIncrease * mtu * a * b / target * 65536),
		fiQ16:       int64(cfg.FairIncrease * mtu * a * 65536),
		eta:         int64(cfg.Eta * mtu * a),
		fastQ16:     int64(cfg.FastIncrease * a * 65536),
		gammaQ16:    int64(cfg.Gamma * 65536),
		qaThresh:    int64(cfg.QAThreshold * target),
		adjustBytes: int64(cfg.AdjustMTUs) * int64(net.MTU),
		minW:        int64(net.MTU),
		noQA:        cfg.DisableQuickAdapt,
	}
	p.maxW = max(int64(cfg.MaxWindowBDP*bdp), p.minW)
	if p.maxW > 1<<30 {
		return nil, fmt.Errorf("nscc.max_window_bdp = %v: the window (%d bytes) must be at most 1 GiB", cfg.MaxWindowBDP, p.maxW)
	}
	p.qaGate = p.maxW >> cfg.QAGateShift
	return p, nil
}

// state is NSCC's per-flow state as a NIC holds it; Cost().StateBytes is its size.
type state struct {
	inc        int64  // accumulated increase, bytes x cwnd (applied as inc/cwnd)
	cwnd       uint32 // bytes
	recv       uint32 // bytes acknowledged since the last adjustment
	achieved   uint32 // bytes acknowledged in this QuickAdapt period
	fiCount    uint32 // bytes acknowledged with near-zero delay in a row
	toIgnore   uint32 // bytes in flight at the last QuickAdapt: their ACKs are ignored
	ignored    uint32
	avgDelay   uint32 // ns, EWMA of the queueing delay (weight 1/80 = 0.0125)
	lastDec    uint32 // ns (low 32 bits)
	lastAdjust uint32 // ns
	qaEnd      uint32 // ns: end of the current QuickAdapt period
	flags      uint32 // bit 0: fast increase on; bit 1: QuickAdapt triggered by a loss; bit 2: qaEnd set; bit 3: decreased once
}

const stateBytes = int(unsafe.Sizeof(state{})) // pinned by cctest.TestEveryControllerHonoursContract

// NSCC is one connection's controller.
type NSCC struct {
	p  *Params
	s  state
	st cc.Stats
}

// New returns an NSCC controller for one flow, starting at maxwnd.
func New(p *Params) *NSCC {
	return &NSCC{p: p, s: state{cwnd: uint32(p.maxW)}}
}

// quickAdapt closes a QuickAdapt period when it has ended: if a loss or a delay above
// the threshold was seen and the window achieved less than the gate, the window is set
// to the bytes achieved and the ACKs of packets already in flight are ignored. It
// reports whether this ACK is consumed (QuickAdapt fired or the ACK is ignored).
func (n *NSCC) quickAdapt(now, delay int64, loss bool, inflight int) bool {
	s, p := &n.s, n.p
	if p.noQA {
		return false
	}
	if s.ignored < s.toIgnore {
		return true
	}
	done := false
	if s.flags&4 == 0 || int32(uint32(now)-s.qaEnd) > 0 {
		if s.flags&4 != 0 && (s.flags&2 != 0 || loss || delay > p.qaThresh) && int64(s.achieved) < p.qaGate {
			s.cwnd = uint32(max(int64(s.achieved), p.minW))
			s.toIgnore, s.ignored = uint32(max(inflight, 0)), 0
			s.flags &^= 2
			n.st.QuickAdapts++
			n.st.Cuts++
			done = true
		}
		s.achieved = 0
		s.qaEnd = uint32(now + p.baseRTT + p.target)
		s.flags |= 4
	}
	if done {
		s.inc, s.recv = 0, 0
	}
	return done
}

// OnAck applies the quadrant of (CE, delay vs target) the ACK falls in.
func (n *NSCC) OnAck(a cc.Ack) {
	s, p := &n.s, n.p
	b := int64(a.Bytes)
	s.achieved += uint32(b)
	if s.ignored < s.toIgnore {
		s.ignored += uint32(b)
		return
	}
	if a.RTT <= 0 {
		return
	}
	delay := max(a.RTT-p.baseRTT, 0)
	s.avgDelay = uint32(int64(s.avgDelay) + (delay-int64(s.avgDelay))/80)
	if n.quickAdapt(a.Now, delay, false, a.InFlight) {
		return
	}
	ce := a.CE || a.CECount > 0
	cw := int64(s.cwnd)
	switch {
	case !ce && delay >= p.target:
		s.inc += p.fiQ16 * b >> 16
		s.flags &^= 1
	case !ce:
		if delay < 1000 {
			s.fiCount += uint32(b)
			if int64(s.fiCount) > cw || s.flags&1 != 0 {
				cw += p.fastQ16 * b >> 16
				s.flags |= 1
				break
			}
		} else {
			s.fiCount = 0
		}
		s.flags &^= 1
		s.inc += p.alphaQ16 * b * (p.target - delay) >> 16
	case delay >= p.target:
		s.flags &^= 1
		s.fiCount = 0
		avg := int64(s.avgDelay)
		if avg > p.target && (s.flags&8 == 0 || int64(uint32(a.Now)-s.lastDec) > p.baseRTT) {
			f := p.gammaQ16 * (avg - p.target) / avg
			cw = max(cw*(65536-f)>>16, cw>>1)
			s.lastDec, s.flags = uint32(a.Now), s.flags|8
			n.st.Cuts++
		}
	}
	cw = min(max(cw, p.minW), p.maxW)
	s.recv += uint32(b)
	if int64(s.recv) > p.adjustBytes || int64(uint32(a.Now)-s.lastAdjust) > p.baseRTT {
		cw += s.inc / cw
		if int64(uint32(a.Now)-s.lastAdjust) >= p.baseRTT {
			cw += p.eta
			s.lastAdjust = uint32(a.Now)
		}
		s.inc, s.recv = 0, 0
	}
	s.cwnd = uint32(min(max(cw, p.minW), p.maxW))
}

// OnLoss triggers QuickAdapt and, if it does not fire, removes the lost bytes from the
// window.
func (n *NSCC) OnLoss(l cc.Loss) {
	s, p := &n.s, n.p
	s.ignored += uint32(l.Bytes)
	s.flags |= 2
	if n.quickAdapt(l.Now, 0, true, l.InFlight) {
		return
	}
	s.cwnd = uint32(min(max(int64(s.cwnd)-int64(l.Bytes), p.minW), p.maxW))
}

// Window returns the congestion window in bytes.
func (n *NSCC) Window() int { return int(n.s.cwnd) }

// PacingRate returns 0: NSCC is window-based.
func (n *NSCC) PacingRate() int64 { return 0 }

// Target returns the target queueing delay, ns.
func (n *NSCC) Target() int64 { return n.p.target }

// CCStats reports the controller's counters (cc.StatsReporter).
func (n *NSCC) CCStats() cc.Stats { return n.st }

// Cost reports NSCC's footprint: 56 bytes of state, integer-only; the worst case per
// ACK is QuickAdapt's check, the MD's division and the adjustment's division.
func (n *NSCC) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "nscc", StateBytes: stateBytes, GlobalBytes: 14 * 8, Ops: 70, IntegerOnly: true}
}
