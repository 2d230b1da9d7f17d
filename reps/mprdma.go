package reps

import (
	"math/rand/v2"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/hwprofile"
)

// mprdmaSlots bounds the ACK-clocked EVs waiting for the window: MP-RDMA sends on an
// ACK's path as the ACK arrives, so only the few ACKs of one engine step wait here.
const mprdmaSlots = 8

// MPRDMA is MP-RDMA's congestion-aware packet distribution, multi-path ACK clocking
// (Lu et al., "Multi-Path Transport for RDMA in Datacenters", NSDI 2018, Sec. 3.2), the
// REPS paper's MPRDMA baseline: an ACK returning unmarked on a path (EV) clocks one new
// packet out on that same EV; a marked one half a packet (MP-RDMA's window loses half a
// packet per mark, so every second marked ACK sends on its EV again). A packet no ACK
// clocked (the first window, the window's growth, after losses: their EVs return no ACK)
// goes on a new random EV, and once per base RTT one packet probes a new random EV even
// when clocked EVs wait (MP-RDMA's periodic new-path probing). Not modelled: MP-RDMA's
// out-of-order-aware pruning of slow paths, which needs the sequence numbers the
// balancer interface does not carry. Packed state: 8 clocked EVs (16), ring head and
// count (1), the half-packet bit and last probe time (5) = 22 bytes.
type MPRDMA struct {
	ring       [mprdmaSlots]uint16
	head, n    uint8
	half       bool
	lastProbe  int64
	probeEvery int64
	evs        int
	rng        *rand.Rand
}

// NewMPRDMA returns MP-RDMA's balancer on env's EV space, probing once per base RTT.
func NewMPRDMA(env Env, rng *rand.Rand) *MPRDMA {
	return &MPRDMA{evs: env.evs(), rng: rng, probeEvery: max(env.BaseRTT, 1), lastProbe: -1 << 62}
}

// NextEV returns the EV the oldest waiting ACK clocked, or a new random one to probe.
func (m *MPRDMA) NextEV(now int64, _ int, _ bool) uint16 {
	if m.n == 0 || now-m.lastProbe >= m.probeEvery {
		m.lastProbe = now
		return randomEV(m.rng, m.evs)
	}
	ev := m.ring[m.head]
	m.head = (m.head + 1) % mprdmaSlots
	m.n--
	return ev
}

// OnAck clocks one packet (unmarked) or half a packet (marked) onto the ACK's EV.
func (m *MPRDMA) OnAck(_ int64, ev uint16, ce bool, _ int64) {
	if ce {
		m.half = !m.half
		if m.half {
			return
		}
	}
	if m.n == mprdmaSlots { // the oldest is stale: overwrite it
		m.head = (m.head + 1) % mprdmaSlots
		m.n--
	}
	m.ring[(m.head+m.n)%mprdmaSlots] = ev
	m.n++
}

// OnLoss ignores the loss: a lost packet's EV returns no ACK, so it clocks nothing.
func (m *MPRDMA) OnLoss(int64, uint16, cc.LossCause) {}

// Cost reports MP-RDMA's packed state (22 bytes).
func (m *MPRDMA) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "mprdma", StateBytes: 2*mprdmaSlots + 6, GlobalBytes: 8, Ops: 10, IntegerOnly: true}
}
