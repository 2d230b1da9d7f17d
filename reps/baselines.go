package reps

import (
	"math/rand/v2"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/hwprofile"
)

// OPS is oblivious packet spraying: a uniformly random EV for every packet. It keeps no
// per-connection state (the random source is the NIC's, shared by all connections).
type OPS struct {
	evs int
	rng *rand.Rand
}

// NewOPS returns OPS drawing from env's EV space.
func NewOPS(env Env, rng *rand.Rand) *OPS { return &OPS{evs: env.evs(), rng: rng} }

// NextEV returns a random EV.
func (o *OPS) NextEV(int64, int, bool) uint16 { return randomEV(o.rng, o.evs) }

// OnAck ignores the feedback.
func (o *OPS) OnAck(int64, uint16, bool, int64) {}

// OnLoss ignores the feedback.
func (o *OPS) OnLoss(int64, uint16, cc.LossCause) {}

// Cost reports OPS's state: none per connection.
func (o *OPS) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "ops", StateBytes: 0, Ops: 2, IntegerOnly: true}
}

// PLB is PLB-style repathing: the flow keeps one EV and moves to a new random one after
// Rounds consecutive rounds in which at least CEPercent of the ACKs echoed CE, or after a
// retransmission timeout. Packed state: EV (2), round start (4), ACKs and marks in the
// round (2 + 2), congested rounds (1) = 11 bytes.
type PLB struct {
	ev         uint16
	acks, ces  uint16
	congested  uint8
	roundStart int64
	round      int64
	pct        uint16
	rounds     uint8
	evs        int
	rng        *rand.Rand
	repaths    uint64 // metrics only
}

// NewPLB returns PLB with cfg's parameters; cfg must be valid.
func NewPLB(cfg Config, env Env, rng *rand.Rand) *PLB {
	cfg = cfg.derive(env.BaseRTT)
	p := &PLB{evs: env.evs(), rng: rng, round: int64(cfg.PLB.Round),
		pct: uint16(cfg.PLB.CEPercent), rounds: uint8(cfg.PLB.Rounds)}
	p.ev = randomEV(rng, p.evs)
	return p
}

// NextEV returns the flow's current EV.
func (p *PLB) NextEV(int64, int, bool) uint16 { return p.ev }

// OnAck counts the round's ACKs and marks and repaths at the end of a congested round.
func (p *PLB) OnAck(now int64, _ uint16, ce bool, _ int64) {
	if now-p.roundStart >= p.round {
		if p.acks > 0 && uint32(p.ces)*100 >= uint32(p.pct)*uint32(p.acks) {
			p.congested++
			if p.congested >= p.rounds {
				p.repath()
			}
		} else {
			p.congested = 0
		}
		p.acks, p.ces, p.roundStart = 0, 0, now
	}
	if p.acks < 0xffff {
		p.acks++
		if ce {
			p.ces++
		}
	}
}

// OnLoss repaths after a retransmission timeout.
func (p *PLB) OnLoss(_ int64, _ uint16, cause cc.LossCause) {
	if cause == cc.LossTimeout {
		p.repath()
	}
}

func (p *PLB) repath() {
	p.ev = randomEV(p.rng, p.evs)
	p.congested = 0
	p.repaths++
}

// Repaths counts the times the flow moved to a new EV.
func (p *PLB) Repaths() uint64 { return p.repaths }

// Cost reports PLB's packed state (11 bytes).
func (p *PLB) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "plb", StateBytes: 11, GlobalBytes: 8, Ops: 12, IntegerOnly: true}
}

// Flowlet is host-side flowlet switching: a new random EV whenever the connection was
// silent for longer than the flowlet gap. Packed state: EV (2) and last send time (4) = 6 bytes.
type Flowlet struct {
	ev   uint16
	last int64
	gap  int64
	evs  int
	rng  *rand.Rand
}

// NewFlowlet returns flowlet switching with cfg's gap; cfg must be valid.
func NewFlowlet(cfg Config, env Env, rng *rand.Rand) *Flowlet {
	cfg = cfg.derive(env.BaseRTT)
	f := &Flowlet{gap: int64(cfg.FlowletGap), evs: env.evs(), rng: rng, last: -1 << 62}
	return f
}

// NextEV starts a new flowlet on a new EV after an idle gap.
func (f *Flowlet) NextEV(now int64, _ int, _ bool) uint16 {
	if now-f.last > f.gap {
		f.ev = randomEV(f.rng, f.evs)
	}
	f.last = now
	return f.ev
}

// OnAck ignores the feedback.
func (f *Flowlet) OnAck(int64, uint16, bool, int64) {}

// OnLoss ignores the feedback.
func (f *Flowlet) OnLoss(int64, uint16, cc.LossCause) {}

// Cost reports the flowlet balancer's packed state (6 bytes).
func (f *Flowlet) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "flowlet", StateBytes: 6, GlobalBytes: 4, Ops: 4, IntegerOnly: true}
}

// MPTCP is MPTCP-like striping: k fixed random EVs (subflows), used round robin per
// packet. Unlike MPTCP it has no per-subflow congestion control (the connection's
// controller sees all subflows), which makes it cheaper: 2k + 1 bytes (17 for k = 8;
// the REPS paper counts 368 extra bytes for 8 real MPTCP subflows).
type MPTCP struct {
	evs  [64]uint16
	k    uint8
	next uint8
}

// NewMPTCP returns k = cfg.Subflows subflows on random EVs; cfg must be valid.
func NewMPTCP(cfg Config, env Env, rng *rand.Rand) *MPTCP {
	m := &MPTCP{k: uint8(min(max(cfg.Subflows, 1), 64))}
	for i := range m.k {
		m.evs[i] = randomEV(rng, env.evs())
	}
	return m
}

// NextEV returns the next subflow's EV.
func (m *MPTCP) NextEV(int64, int, bool) uint16 {
	ev := m.evs[m.next]
	m.next++
	if m.next == m.k {
		m.next = 0
	}
	return ev
}

// OnAck ignores the feedback.
func (m *MPTCP) OnAck(int64, uint16, bool, int64) {}

// OnLoss ignores the feedback.
func (m *MPTCP) OnLoss(int64, uint16, cc.LossCause) {}

// Cost reports the subflows' packed state (2k + 1 bytes).
func (m *MPTCP) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "mptcp", StateBytes: 2*int(m.k) + 1, Ops: 3, IntegerOnly: true}
}
