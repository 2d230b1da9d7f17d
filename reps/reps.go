// Package reps holds the load balancers: which entropy value (EV) each packet travels
// with, the value switches hash with ECMP (here the UDP source port). REPS (recycled
// entropy packet spraying, with freezing mode) is the default; ECMP, OPS, PLB, host-side
// flowlets and MPTCP-like subflows are the baselines it is compared with. See docs/reps.md.
package reps

import (
	"math/rand/v2"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/hwprofile"
	"github.com/smartt-transport/smartt/transport/wire"
)

// Balancer chooses the EV of each outgoing data packet and learns from the feedback.
// Implementations are deterministic given their RNG and allocation-free. A trimmed
// packet is reported as OnLoss with cause cc.LossTrim.
type Balancer interface {
	// NextEV returns the EV for the next data packet of size bytes (retx: a retransmission).
	NextEV(now int64, size int, retx bool) uint16
	// OnAck reports the echoed EV of an acknowledged packet and whether it was CE-marked.
	OnAck(now int64, ev uint16, ce bool, rtt int64)
	// OnLoss reports a packet judged lost and why.
	OnLoss(now int64, ev uint16, cause cc.LossCause)
}

// CoalescedAcker is implemented by balancers that want a coalesced ACK whole: the EV
// and CE mark of the packet that triggered it plus every unmarked EV it reports (the
// ACK's optional clean-EV list). The engine calls it instead of OnAck when the list is
// present; clean aliases the packet and is valid only during the call.
type CoalescedAcker interface {
	OnCoalescedAck(now int64, trigger uint16, ce bool, clean []uint16, rtt int64)
}

// Freezer is implemented by balancers with a freezing mode, for status and metrics.
type Freezer interface {
	// Freezing reports whether the balancer is in freezing mode at time now.
	Freezing(now int64) bool
	// FreezeEpisodes counts the times freezing mode was entered.
	FreezeEpisodes() uint64
}

// Env is what a balancer takes from its endpoint's configuration.
type Env struct {
	EVS        int   // usable EVs, 1..65536: EVs are drawn from [0, EVS)
	BDPPackets int   // bandwidth-delay product in data packets (REPS explores this many)
	BaseRTT    int64 // RTT of an empty network, ns (derived defaults scale with it)
	Trimming   bool  // switches trim: an untrimmed loss means failure, not congestion
}

func (e Env) evs() int {
	if wire.CheckEVS(e.EVS) != nil {
		return wire.MaxEVS
	}
	return e.EVS
}

func randomEV(rng *rand.Rand, evs int) uint16 { return uint16(rng.IntN(evs)) }

// ECMP keeps one EV for the whole connection, like a flow hashed by plain ECMP.
type ECMP struct {
	EV uint16
}

// NewECMP picks the connection's EV uniformly from an EV space of evs values (1..65536).
func NewECMP(rng *rand.Rand, evs int) *ECMP {
	return &ECMP{EV: randomEV(rng, Env{EVS: evs}.evs())}
}

// NextEV returns the connection's fixed EV.
func (e *ECMP) NextEV(int64, int, bool) uint16 { return e.EV }

// OnAck ignores the feedback.
func (e *ECMP) OnAck(int64, uint16, bool, int64) {}

// OnLoss ignores the feedback.
func (e *ECMP) OnLoss(int64, uint16, cc.LossCause) {}

// Cost reports ECMP's state: one 16-bit EV.
func (e *ECMP) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "ecmp", StateBytes: 2, Ops: 1, IntegerOnly: true}
}
