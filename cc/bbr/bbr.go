// Package bbr implements a BBR v1-style controller (Cardwell et al., "BBR:
// Congestion-Based Congestion Control", ACM Queue 2016): a bottleneck-bandwidth max
// filter and a min-RTT filter drive the pacing rate (gain x btlbw) and the window
// (cwnd gain x btlbw x min_rtt) through the STARTUP, DRAIN, PROBE_BW (pacing-gain cycle
// 5/4, 3/4, 1 x 6) and PROBE_RTT states. Without a send hook in the engine, the
// delivery rate is measured per round trip from the acknowledged bytes over the round's
// duration. Integer-only: gains in Q8, rates in kB/s.
package bbr

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/hwprofile"
)

// Config holds BBR's parameters (YAML section "bbr"); the defaults are BBR v1's.
type Config struct {
	// BwWindowRounds is the bottleneck-bandwidth filter length in round trips (10).
	BwWindowRounds int `yaml:"bw_window_rounds"`
	// MinRTTWindow is the min-RTT filter's expiry (10s).
	MinRTTWindow config.Duration `yaml:"min_rtt_window"`
	// ProbeRTTTime is how long PROBE_RTT holds the window at 4 packets (200ms).
	ProbeRTTTime config.Duration `yaml:"probe_rtt_time"`
	// CwndGain is the window gain in PROBE_BW (2).
	CwndGain float64 `yaml:"cwnd_gain"`
}

// DefaultConfig returns BBR v1's constants.
func DefaultConfig() Config {
	return Config{BwWindowRounds: 10, MinRTTWindow: 10_000_000_000, ProbeRTTTime: 200_000_000, CwndGain: 2}
}

// Params are the constants derived once per endpoint.
type Params struct {
	rounds         uint16
	minRTTWinUs    uint32
	probeRTTUs     uint32
	cwndGainQ8     int64
	mtu, line      int64 // bytes, kB/s
	baseRTT        int64 // ns: the first min-RTT estimate
	minCwnd, maxCw int64
}

// NewParams validates cfg for a network and derives the constants.
func NewParams(cfg Config, net config.Network) (*Params, error) {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("bbr."+format, a...)) }
	if cfg.BwWindowRounds < 2 || cfg.BwWindowRounds > 1000 {
		bad("bw_window_rounds = %d: must be in 2..1000", cfg.BwWindowRounds)
	}
	if cfg.MinRTTWindow < 1_000_000 || cfg.MinRTTWindow > 3600_000_000_000 {
		bad("min_rtt_window = %v: must be in 1ms..1h", cfg.MinRTTWindow)
	}
	if cfg.ProbeRTTTime < 1000 || cfg.ProbeRTTTime > cfg.MinRTTWindow {
		bad("probe_rtt_time = %v: must be in 1us..min_rtt_window (%v)", cfg.ProbeRTTTime, cfg.MinRTTWindow)
	}
	if !(cfg.CwndGain >= 1 && cfg.CwndGain <= 10) {
		bad("cwnd_gain = %v: must be in 1..10", cfg.CwndGain)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p := &Params{rounds: uint16(cfg.BwWindowRounds), minRTTWinUs: uint32(cfg.MinRTTWindow / 1000),
		probeRTTUs: uint32(cfg.ProbeRTTTime / 1000), cwndGainQ8: int64(cfg.CwndGain * 256),
		mtu: int64(net.MTU), line: net.LinkRate / 8000, baseRTT: net.BaseRTT}
	p.minCwnd = 4 * p.mtu
	p.maxCw = max(8*net.BDP(), p.minCwnd)
	if p.maxCw > 1<<31 {
		return nil, fmt.Errorf("bbr: the window cap (%d bytes, 8 BDPs) must be at most 2 GiB", p.maxCw)
	}
	return p, nil
}

// Modes of the state machine.
const (
	Startup  uint8 = iota // fill the pipe: pacing gain 2.885
	Drain                 // drain the queue STARTUP built: pacing gain 1/2.885
	ProbeBW               // cruise with the pacing-gain cycle
	ProbeRTT              // window of 4 packets to measure the min RTT
)

// Gains in Q8.
const (
	highGain  = 739 // 2/ln 2 = 2.885
	drainGain = 89  // 1/2.885
	unit      = 256
)

// cycle is PROBE_BW's pacing-gain cycle.
var cycle = [8]uint16{320, 192, unit, unit, unit, unit, unit, unit}

// state is BBR's per-flow state as a NIC holds it; Cost().StateBytes is its size.
type state struct {
	bwCur, bwPrev uint32 // kB/s: max delivery rate of this and the previous filter window
	fullBw        uint32 // kB/s: bandwidth at the last 25 % growth (STARTUP exit)
	minRTT        uint32 // ns
	minRTTStamp   uint32 // us
	roundStart    uint32 // ns
	roundBytes    uint32 // bytes acknowledged in this round
	phaseStart    uint32 // ns: start of the PROBE_BW phase
	probeRTTEnd   uint32 // us
	round         uint16
	mode          uint8
	phase         uint8
	fullBwCount   uint8
	_             [3]uint8
}

const stateBytes = int(unsafe.Sizeof(state{})) // pinned by cctest.TestEveryControllerHonoursContract

// BBR is one connection's controller.
type BBR struct {
	p  *Params
	s  state
	st cc.Stats
}

// New returns a BBR controller for one flow in STARTUP, its bandwidth estimate seeded
// with the line rate and its min RTT with the configured base RTT.
func New(p *Params) *BBR {
	return &BBR{p: p, s: state{bwCur: uint32(p.line), minRTT: uint32(p.baseRTT), mode: Startup}}
}

// bw returns the bottleneck-bandwidth estimate, kB/s.
func (b *BBR) bw() int64 { return int64(max(b.s.bwCur, b.s.bwPrev)) }

// bdp is the estimated bandwidth-delay product, bytes.
func (b *BBR) bdp() int64 { return b.bw() * int64(b.s.minRTT) / 1_000_000 }

// Mode returns the state-machine mode (Startup, Drain, ProbeBW, ProbeRTT).
func (b *BBR) Mode() uint8 { return b.s.mode }

// OnAck updates the filters once per round trip and steps the state machine.
func (b *BBR) OnAck(a cc.Ack) {
	s, p := &b.s, b.p
	nowUs := uint32(a.Now / 1000)
	if a.RTT > 0 && (uint32(a.RTT) <= s.minRTT || nowUs-s.minRTTStamp > p.minRTTWinUs) {
		expired := nowUs-s.minRTTStamp > p.minRTTWinUs
		s.minRTT, s.minRTTStamp = uint32(min(a.RTT, 1<<31)), nowUs
		if expired && s.mode != ProbeRTT && s.mode != Startup {
			s.mode, s.probeRTTEnd = ProbeRTT, nowUs+p.probeRTTUs
		}
	}
	s.roundBytes += uint32(a.Bytes)
	el := int64(uint32(a.Now) - s.roundStart)
	if el >= int64(s.minRTT) {
		rate := int64(s.roundBytes) * 1_000_000 / max(el, 1) // kB/s
		s.roundStart, s.roundBytes = uint32(a.Now), 0
		s.round++
		if s.round%p.rounds == 0 {
			s.bwPrev, s.bwCur = s.bwCur, 0
		}
		s.bwCur = max(s.bwCur, uint32(min(rate, p.line)))
		b.roundEnd(a)
	}
	switch s.mode {
	case Drain:
		if int64(a.InFlight) <= b.bdp() {
			b.enterProbeBW(a.Now)
		}
	case ProbeBW:
		if int64(uint32(a.Now)-s.phaseStart) >= int64(s.minRTT) {
			s.phase = (s.phase + 1) % uint8(len(cycle))
			s.phaseStart = uint32(a.Now)
		}
	case ProbeRTT:
		if int32(nowUs-s.probeRTTEnd) >= 0 {
			b.enterProbeBW(a.Now)
		}
	}
}

// roundEnd checks STARTUP's exit: three rounds without 25 % bandwidth growth.
func (b *BBR) roundEnd(a cc.Ack) {
	s := &b.s
	if s.mode != Startup {
		return
	}
	if bw := uint32(b.bw()); int64(bw) >= int64(s.fullBw)*5/4 {
		s.fullBw, s.fullBwCount = bw, 0
		return
	}
	s.fullBwCount++
	if s.fullBwCount >= 3 {
		s.mode = Drain
		if int64(a.InFlight) <= b.bdp() {
			b.enterProbeBW(a.Now)
		}
	}
}

func (b *BBR) enterProbeBW(now int64) {
	b.s.mode, b.s.phase, b.s.phaseStart = ProbeBW, 2, uint32(now) // start in a cruise phase
}

// OnLoss counts the loss; BBR v1 does not react to loss beyond its model.
func (b *BBR) OnLoss(cc.Loss) { b.st.Cuts++ }

// pacingGain is the current mode's pacing gain, Q8.
func (b *BBR) pacingGain() int64 {
	switch b.s.mode {
	case Startup:
		return highGain
	case Drain:
		return drainGain
	case ProbeBW:
		return int64(cycle[b.s.phase])
	}
	return unit
}

// Window is cwnd_gain x the estimated BDP (2.885 in STARTUP and DRAIN), 4 packets in
// PROBE_RTT.
func (b *BBR) Window() int {
	p := b.p
	if b.s.mode == ProbeRTT {
		return int(p.minCwnd)
	}
	g := p.cwndGainQ8
	if b.s.mode == Startup || b.s.mode == Drain {
		g = highGain
	}
	return int(min(max(b.bdp()*g>>8, p.minCwnd), p.maxCw))
}

// PacingRate is the pacing gain times the bandwidth estimate, bytes per second.
func (b *BBR) PacingRate() int64 { return b.bw() * b.pacingGain() >> 8 * 1000 }

// CCStats reports the controller's counters (cc.StatsReporter).
func (b *BBR) CCStats() cc.Stats { return b.st }

// Cost reports BBR's footprint: 44 bytes of state, integer-only; the worst case per
// ACK is a round end (a division, the filters and the state machine).
func (b *BBR) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "bbr", StateBytes: stateBytes, GlobalBytes: 8*8 + 16, Ops: 60, IntegerOnly: true}
}
