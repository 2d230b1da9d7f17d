// Package dctcp implements DCTCP (Alizadeh et al., SIGCOMM 2010) and the per-ACK ECN
// reaction of MP-RDMA (Lu et al., NSDI 2018; the REPS paper's baseline) as window-based
// congestion controllers. Both are integer-only: the window is held in bytes, DCTCP's
// marking estimate alpha in Q16 fixed point, and the EWMA gain g is a power of two.
package dctcp

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/hwprofile"
)

// Config holds the parameters of both controllers (YAML sections "dctcp" and "mprdma").
type Config struct {
	// GShift sets DCTCP's EWMA gain g = 2^-GShift (paper: g = 1/16, GShift 4).
	GShift int `yaml:"g_shift"`
	// InitialWindowBDP is the first window in bandwidth-delay products (default 1: a
	// datacenter flow starts at line rate, as in the SMaRTT and REPS papers' baselines).
	InitialWindowBDP float64 `yaml:"initial_window_bdp"`
	// MaxWindowBDP caps the window in bandwidth-delay products (default 1.5, as NSCC's maxwnd).
	MaxWindowBDP float64 `yaml:"max_window_bdp"`
	// MinWindowMTUs is the floor of the window in MTUs (default 1).
	MinWindowMTUs int `yaml:"min_window_mtus"`
}

// DefaultConfig returns the papers' defaults.
func DefaultConfig() Config {
	return Config{GShift: 4, InitialWindowBDP: 1, MaxWindowBDP: 1.5, MinWindowMTUs: 1}
}

// Params are the derived per-endpoint constants, shared by every connection.
type Params struct {
	gShift uint
	mtu    int64
	init   int64
	min    int64
	max    int64
}

// NewParams validates cfg for a network and derives the constants; section names the
// YAML section in errors ("dctcp" or "mprdma").
func NewParams(section string, cfg Config, net config.Network) (*Params, error) {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(section+"."+format, a...)) }
	if cfg.GShift < 1 || cfg.GShift > 10 {
		bad("g_shift = %d: must be in 1..10 (g = 1/2 .. 1/1024)", cfg.GShift)
	}
	if !(cfg.MaxWindowBDP >= 0.1 && cfg.MaxWindowBDP <= 100) {
		bad("max_window_bdp = %v: must be in 0.1..100", cfg.MaxWindowBDP)
	}
	if !(cfg.InitialWindowBDP > 0 && cfg.InitialWindowBDP <= cfg.MaxWindowBDP) {
		bad("initial_window_bdp = %v: must be in (0, max_window_bdp (%v)]", cfg.InitialWindowBDP, cfg.MaxWindowBDP)
	}
	if cfg.MinWindowMTUs < 1 || cfg.MinWindowMTUs > 1024 {
		bad("min_window_mtus = %d: must be in 1..1024", cfg.MinWindowMTUs)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	bdp := float64(net.BDP())
	p := &Params{gShift: uint(cfg.GShift), mtu: int64(net.MTU), min: int64(cfg.MinWindowMTUs) * int64(net.MTU)}
	p.max = max(int64(cfg.MaxWindowBDP*bdp), p.min)
	p.init = min(max(int64(cfg.InitialWindowBDP*bdp), p.min), p.max)
	if p.max > 1<<30 {
		return nil, fmt.Errorf("%s.max_window_bdp = %v: the window (%d bytes) must be at most 1 GiB", section, cfg.MaxWindowBDP, p.max)
	}
	return p, nil
}

// one is alpha = 1 in Q16.
const one = 1 << 16

// state is DCTCP's per-flow state as a NIC holds it; Cost().StateBytes is its size.
type state struct {
	cwnd     uint32 // bytes
	alpha    uint32 // Q16 fraction of marked bytes, EWMA
	acked    uint32 // bytes acknowledged in this observation window
	marked   uint32 // of which CE-marked
	epochLen uint32 // the observation window: the window at its start, bytes
	flags    uint32 // bit 0: a loss already cut the window in this observation window
}

// DCTCP is one connection's DCTCP controller: alpha is updated once per window of
// acknowledged data (one RTT) as alpha = (1-g) alpha + g F, with F the fraction of
// CE-marked bytes in it, and a window with marks ends with cwnd -= cwnd alpha/2.
// Unmarked ACKs grow the window by one MTU per window (congestion avoidance); a loss
// halves it, at most once per window.
type DCTCP struct {
	p  *Params
	s  state
	st cc.Stats
}

// New returns a DCTCP controller for one flow.
func New(p *Params) *DCTCP {
	return &DCTCP{p: p, s: state{cwnd: uint32(p.init), epochLen: uint32(p.init)}}
}

// markedBytes is the part of an ACK's bytes that arrived CE-marked.
func markedBytes(a *cc.Ack, mtu int64) int64 {
	n := int64(a.CECount)
	if n == 0 && a.CE {
		n = 1
	}
	return min(n*mtu, int64(a.Bytes))
}

// OnAck accounts the ACK's marks, grows the window and closes the observation window.
func (d *DCTCP) OnAck(a cc.Ack) {
	s, p := &d.s, d.p
	b := int64(a.Bytes)
	m := markedBytes(&a, p.mtu)
	s.acked += uint32(b)
	s.marked += uint32(m)
	cw := int64(s.cwnd)
	if m == 0 {
		cw += p.mtu * b / cw
	}
	if s.acked >= s.epochLen {
		f := int64(s.marked) * one / int64(s.acked) // Q16 fraction marked
		al := int64(s.alpha)
		al += (f - al) >> p.gShift
		s.alpha = uint32(al)
		if s.marked > 0 {
			cw -= cw * al >> 17
			d.st.Cuts++
		}
		s.acked, s.marked, s.flags = 0, 0, 0
		cw = clamp(cw, p)
		s.epochLen = uint32(cw)
	}
	s.cwnd = uint32(clamp(cw, p))
}

// OnLoss halves the window, at most once per observation window.
func (d *DCTCP) OnLoss(l cc.Loss) {
	if d.s.flags&1 != 0 {
		return
	}
	d.s.flags |= 1
	d.s.cwnd = uint32(clamp(int64(d.s.cwnd)/2, d.p))
	d.st.Cuts++
}

func clamp(w int64, p *Params) int64 { return min(max(w, p.min), p.max) }

// Window returns the congestion window in bytes.
func (d *DCTCP) Window() int { return int(d.s.cwnd) }

// PacingRate returns 0: DCTCP is window-based.
func (d *DCTCP) PacingRate() int64 { return 0 }

// Alpha returns the marking estimate as a fraction (for tests and traces).
func (d *DCTCP) Alpha() float64 { return float64(d.s.alpha) / one }

// CCStats reports the controller's counters (cc.StatsReporter).
func (d *DCTCP) CCStats() cc.Stats { return d.st }

// Cost reports DCTCP's footprint: six 32-bit words of state, integer-only; the worst
// case per ACK is the window-end update with one division.
func (d *DCTCP) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "dctcp", StateBytes: stateBytes, GlobalBytes: paramsBytes, Ops: 24, IntegerOnly: true}
}

const (
	stateBytes  = int(unsafe.Sizeof(state{})) // pinned by cctest.TestEveryControllerHonoursContract
	paramsBytes = 5 * 4
)

// MPRDMA is one connection's MP-RDMA window control: per ACK, a CE-marked packet cuts
// the window by half an MTU and an unmarked one grows it by MTU^2/cwnd (one MTU per
// window); a lost packet cuts one MTU.
type MPRDMA struct {
	p    *Params
	cwnd uint32 // bytes: the whole per-flow state
	st   cc.Stats
}

// NewMPRDMA returns an MP-RDMA controller for one flow.
func NewMPRDMA(p *Params) *MPRDMA { return &MPRDMA{p: p, cwnd: uint32(p.init)} }

// OnAck reacts to every acknowledged packet: -MTU/2 per marked one, +MTU^2/cwnd per unmarked one.
func (m *MPRDMA) OnAck(a cc.Ack) {
	p := m.p
	pk := max(int64(a.Packets), 1)
	mk := min(markedBytes(&a, p.mtu)/p.mtu, pk)
	if mk == 0 && a.CE {
		mk = 1
	}
	cw := int64(m.cwnd)
	cw += (pk - mk) * p.mtu * p.mtu / cw
	if mk > 0 {
		cw -= mk * p.mtu / 2
		m.st.Cuts++
	}
	m.cwnd = uint32(clamp(cw, p))
}

// OnLoss cuts one MTU.
func (m *MPRDMA) OnLoss(cc.Loss) {
	m.cwnd = uint32(clamp(int64(m.cwnd)-m.p.mtu, m.p))
	m.st.Cuts++
}

// Window returns the congestion window in bytes.
func (m *MPRDMA) Window() int { return int(m.cwnd) }

// PacingRate returns 0: MP-RDMA's window control is not paced here.
func (m *MPRDMA) PacingRate() int64 { return 0 }

// CCStats reports the controller's counters (cc.StatsReporter).
func (m *MPRDMA) CCStats() cc.Stats { return m.st }

// Cost reports MP-RDMA's footprint: a 4-byte window, integer-only.
func (m *MPRDMA) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "mprdma", StateBytes: 4, GlobalBytes: paramsBytes, Ops: 12, IntegerOnly: true}
}
