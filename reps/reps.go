// Package reps defines the load-balancing interface (which entropy value, EV, each packet
// travels with) and the balancers. REPS itself arrives with its own issue; the default here
// is ECMP: one fixed EV per connection.
package reps

import (
	"math/rand/v2"

	"smartt/cc"
	"smartt/hwprofile"
)

// Balancer chooses the EV of each outgoing data packet and learns from the feedback.
// Implementations are deterministic given their RNG and allocation-free.
type Balancer interface {
	// NextEV returns the EV for the next data packet of size bytes (retx: a retransmission).
	NextEV(now int64, size int, retx bool) uint16
	// OnAck reports the echoed EV of an acknowledged packet and whether it was CE-marked.
	OnAck(now int64, ev uint16, ce bool, rtt int64)
	// OnLoss reports a packet judged lost and why.
	OnLoss(now int64, ev uint16, cause cc.LossCause)
}

// ECMP keeps one EV for the whole connection, like a flow hashed by plain ECMP.
type ECMP struct {
	EV uint16
}

// NewECMP picks the connection's EV uniformly from an EV space of evs values (1..65536).
func NewECMP(rng *rand.Rand, evs int) *ECMP {
	if evs <= 0 || evs > 1<<16 {
		evs = 1 << 16
	}
	return &ECMP{EV: uint16(rng.IntN(evs))}
}

// NextEV returns the connection's fixed EV.
func (e *ECMP) NextEV(int64, int, bool) uint16 { return e.EV }

// OnAck ignores the feedback.
func (e *ECMP) OnAck(int64, uint16, bool, int64) {}

// OnLoss ignores the feedback.
func (e *ECMP) OnLoss(int64, uint16, cc.LossCause) {}

// Cost reports ECMP's hardware cost: one 2-byte EV per connection, one load per packet.
func (e *ECMP) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "ecmp", StateBytes: 2, Ops: 1, IntegerOnly: true}
}
