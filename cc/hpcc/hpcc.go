// Package hpcc implements HPCC (Li et al., "HPCC: High Precision Congestion Control",
// SIGCOMM 2019): a window controller driven by in-band network telemetry. Every switch
// port a data packet leaves stamps its queue length, transmitted-byte counter, a
// timestamp and its line rate (transport/wire, INT); the receiver echoes the records in
// the ACK; per ACK the sender estimates each hop's utilisation
//
//	U_j = min(qlen, qlen_prev) / (B_j * T) + txRate_j / B_j
//
// (txRate from the byte counters of two consecutive ACKs), takes the most loaded hop,
// smooths it over the base RTT T, and sets the window toward the target utilisation eta:
// multiplicatively W = Wc / (U/eta) + W_AI when U >= eta or after maxStage additive
// steps, else additively W = Wc + W_AI. The reference window Wc is updated once per RTT
// (when an ACK covers data sent after the previous update), and the pacing rate is W/T.
//
// Integer-only: utilisation in Q16, windows in bytes.
package hpcc

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/hwprofile"
	"github.com/smartt-transport/smartt/transport/wire"
)

// Config holds HPCC's parameters (YAML section "hpcc"); the defaults are the paper's.
type Config struct {
	// Eta is the target link utilisation (paper: 0.95).
	Eta float64 `yaml:"eta"`
	// MaxStage is the number of additive-increase steps before a multiplicative
	// adjustment is forced (paper: 5).
	MaxStage int `yaml:"max_stage"`
	// WAI is the additive increase W_AI in bytes (0: the paper's W_init x (1 - eta) / N
	// with N = ExpectedFlows).
	WAI int `yaml:"w_ai"`
	// ExpectedFlows is N, the expected number of concurrent flows on a link, from which
	// W_AI is derived (default 100, our choice).
	ExpectedFlows int `yaml:"expected_flows"`
}

// DefaultConfig returns the paper's defaults.
func DefaultConfig() Config {
	return Config{Eta: 0.95, MaxStage: 5, ExpectedFlows: 100}
}

// one is 1.0 in Q16.
const one = 1 << 16

// staleNs: an INT record older than this (sender's clock) is not differenced with a new
// one: the 32-bit timestamps and byte counters may have wrapped (2^32 bytes last 43 ms
// at 800 Gbit/s).
const staleNs = 10_000_000

// Params are the constants derived once per endpoint.
type Params struct {
	eta      uint32 // Q16
	maxStage uint8
	t        int64 // base RTT, ns
	winit    int64 // line-rate BDP, bytes
	wai      int64 // bytes
	wmin     int64 // bytes
}

// NewParams validates cfg for a network and derives the constants.
func NewParams(cfg Config, net config.Network) (*Params, error) {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("hpcc."+format, a...)) }
	if !(cfg.Eta >= 0.5 && cfg.Eta <= 1) {
		bad("eta = %v: must be in 0.5..1", cfg.Eta)
	}
	if cfg.MaxStage < 0 || cfg.MaxStage > 100 {
		bad("max_stage = %d: must be in 0..100", cfg.MaxStage)
	}
	if cfg.ExpectedFlows < 1 || cfg.ExpectedFlows > 1<<20 {
		bad("expected_flows = %d: must be in 1..%d", cfg.ExpectedFlows, 1<<20)
	}
	winit := net.BDP()
	if cfg.WAI < 0 || int64(cfg.WAI) > winit {
		bad("w_ai = %d: must be in 0..BDP (%d bytes)", cfg.WAI, winit)
	}
	if winit >= 1<<31 {
		bad("link_rate x base_rtt = %d bytes: the 32-bit window holds at most 2 GiB", winit)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p := &Params{eta: uint32(cfg.Eta * one), maxStage: uint8(cfg.MaxStage), t: net.BaseRTT, winit: max(winit, int64(net.MTU))}
	p.wai = int64(cfg.WAI)
	if p.wai == 0 {
		p.wai = max(p.winit*int64(one-p.eta)/one/int64(cfg.ExpectedFlows), 1)
	}
	p.wmin = max(p.wai, 64)
	return p, nil
}

// hopState is the previous record of one hop (what the next ACK is differenced with).
type hopState struct {
	ts, tx, qlen uint32
}

// state is HPCC's per-flow state as a NIC holds it; Cost().StateBytes is its size.
type state struct {
	w, wc    uint32 // window and reference window, bytes
	u        uint32 // smoothed utilisation, Q16
	stage    uint8  // additive steps since the last multiplicative one
	nprev    uint8  // hops in prev (0: no previous record)
	_        [2]uint8
	prevAt   int64  // sender's clock at prev
	acked    uint64 // bytes acknowledged so far
	updateAt uint64 // acked beyond this: the next ACK updates Wc (HPCC's lastUpdateSeq)
	prev     [wire.MaxINTHops]hopState
}

const stateBytes = int(unsafe.Sizeof(state{})) // pinned by cctest.TestEveryControllerHonoursContract

// HPCC is one connection's controller.
type HPCC struct {
	p  *Params
	s  state
	st cc.Stats
}

// New returns an HPCC controller starting at line rate (W = W_init, the BDP).
func New(p *Params) *HPCC {
	return &HPCC{p: p, s: state{w: uint32(p.winit), wc: uint32(p.winit)}}
}

// measure is MeasureInflight: the utilisation of the most loaded hop, smoothed over
// the base RTT. It reports false when the ACK gives no usable sample (no records, no
// previous ones on the same number of hops, or a stale previous record).
func (h *HPCC) measure(now int64, recs []wire.INTHop) bool {
	s, p := &h.s, h.p
	n := min(len(recs), wire.MaxINTHops)
	usable := n > 0 && int(s.nprev) == n && now-s.prevAt <= staleNs
	var u, tau int64
	found := false
	for i := 0; usable && i < n; i++ {
		r, q := &recs[i], &s.prev[i]
		dt := int64(r.TS - q.ts) // wraps like the switch's 32-bit clock
		if r.Rate == 0 || dt <= 0 || dt > staleNs {
			continue
		}
		// B x T in bytes: Rate in Mbit/s is Rate/8000 bytes per ns.
		bt := int64(r.Rate) * p.t // x 1/8000 bytes
		ql := int64(min(r.QLen, q.qlen))
		uq := ql * 8000 * one / bt
		// txRate / B; a rate above the line rate means the two records came from
		// different ports (a path change), so only the queue term counts.
		tx := int64(r.TxBytes - q.tx)
		ut := tx * 8000 * one / (int64(r.Rate) * dt)
		if ut > one+one/8 {
			ut = 0
		}
		if v := uq + ut; !found || v > u {
			u, tau, found = v, dt, true
		}
	}
	for i := 0; i < n; i++ {
		s.prev[i] = hopState{ts: recs[i].TS, tx: recs[i].TxBytes, qlen: recs[i].QLen}
	}
	s.nprev, s.prevAt = uint8(n), now
	if !found {
		return false
	}
	tau = min(tau, p.t)
	u = min(u, 64*one) // a queue of 64 BDPs is as bad as it gets (bounds the arithmetic)
	s.u = uint32((int64(s.u)*(p.t-tau) + u*tau) / p.t)
	return true
}

// window is ComputeWind: the window for the smoothed utilisation, updating the reference
// window when update is set.
func (h *HPCC) window(update bool) {
	s, p := &h.s, h.p
	var w int64
	if s.u >= p.eta || s.stage >= p.maxStage {
		w = int64(s.wc)*int64(p.eta)/int64(max(s.u, 1)) + p.wai
		if update {
			s.stage = 0
			if s.u >= p.eta {
				h.st.Cuts++
			}
		}
	} else {
		w = int64(s.wc) + p.wai
		if update {
			s.stage++
		}
	}
	w = min(max(w, p.wmin), p.winit)
	s.w = uint32(w)
	if update {
		s.wc = uint32(w)
	}
}

// OnAck measures the path's utilisation from the echoed INT records and adjusts the
// window: the reference window once per RTT, the window on every ACK.
func (h *HPCC) OnAck(a cc.Ack) {
	s := &h.s
	s.acked += uint64(a.Bytes)
	if !h.measure(a.Now, a.INT) {
		return
	}
	update := s.acked > s.updateAt
	if update {
		s.updateAt = s.acked + uint64(a.InFlight) // HPCC's lastUpdateSeq = snd_nxt
	}
	h.window(update)
}

// OnLoss does nothing: HPCC assumes a lossless fabric, and the telemetry already shows
// the queue that caused a loss.
func (h *HPCC) OnLoss(cc.Loss) {}

// Window returns the current window in bytes.
func (h *HPCC) Window() int { return int(h.s.w) }

// PacingRate returns W / T in bytes per second.
func (h *HPCC) PacingRate() int64 { return int64(h.s.w) * 1_000_000_000 / h.p.t }

// Utilisation returns the smoothed utilisation estimate (1: the bottleneck exactly full).
func (h *HPCC) Utilisation() float64 { return float64(h.s.u) / one }

// RefWindow returns the reference window Wc in bytes.
func (h *HPCC) RefWindow() int { return int(h.s.wc) }

// CCStats reports the controller's counters (cc.StatsReporter).
func (h *HPCC) CCStats() cc.Stats { return h.st }

// Cost reports HPCC's footprint: 104 bytes of state (with 5 hops of previous records),
// integer-only; per ACK, 5 hops of two divisions and a compare each, the smoothing and
// the window step.
func (h *HPCC) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "hpcc", StateBytes: stateBytes, GlobalBytes: 6 * 8, Ops: 5*14 + 30, IntegerOnly: true}
}
