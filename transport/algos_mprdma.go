package transport

import (
	"math/rand/v2"

	"github.com/smartt-transport/smartt/reps"
)

// MP-RDMA's ACK-clocked multi-path balancer (reps.MPRDMA), a REPS paper baseline.
func init() {
	registerLB(LBRegistration{Name: "mprdma", Prepare: func(cfg *Config) (func(rng *rand.Rand) reps.Balancer, error) {
		env := lbEnv(cfg)
		return func(rng *rand.Rand) reps.Balancer { return reps.NewMPRDMA(env, rng) }, nil
	}})
}
