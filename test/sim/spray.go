package sim

import (
	"math/rand/v2"

	"smartt/cc"
	"smartt/hwprofile"
	"smartt/reps"
	"smartt/transport"
)

// Spray is oblivious per-packet spraying: every data packet takes a uniformly random EV.
// It is the simulator's own stand-in, for validation and for runs before the project's
// spraying balancers (reps "ops", "reps") are selectable by name; Scenario.Spray and
// "smartt sim run -spray" plug it in.
type Spray struct {
	rng *rand.Rand
	evs int
}

// NextEV returns a random EV.
func (b *Spray) NextEV(int64, int, bool) uint16 { return uint16(b.rng.IntN(b.evs)) }

// OnAck ignores the feedback.
func (b *Spray) OnAck(int64, uint16, bool, int64) {}

// OnLoss ignores the feedback.
func (b *Spray) OnLoss(int64, uint16, cc.LossCause) {}

// Cost reports no per-flow state beyond the shared generator.
func (b *Spray) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "spray", StateBytes: 0, Ops: 2, IntegerOnly: true}
}

// UseSpray sets cfg's balancer to Spray (a Scenario.NewTransport hook).
func UseSpray(_ int, cfg *transport.Config) {
	evs := cfg.EVS
	cfg.NewBalancer = func(rng *rand.Rand) reps.Balancer { return &Spray{rng: rng, evs: evs} }
}
