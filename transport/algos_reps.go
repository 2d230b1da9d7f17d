package transport

import (
	"math/rand/v2"

	"github.com/smartt-transport/smartt/reps"
)

// The load balancers of package reps; "ecmp" is registered in algos.go. Each Prepare
// derives the balancer's environment once per endpoint.
func init() {
	reg := func(name string, mk func(c reps.Config, env reps.Env, rng *rand.Rand) reps.Balancer) {
		registerLB(LBRegistration{Name: name, Prepare: func(cfg *Config) (func(rng *rand.Rand) reps.Balancer, error) {
			c, env := cfg.REPS, lbEnv(cfg)
			return func(rng *rand.Rand) reps.Balancer { return mk(c, env, rng) }, nil
		}})
	}
	reg("reps", func(c reps.Config, env reps.Env, rng *rand.Rand) reps.Balancer { return reps.NewREPS(c, env, rng) })
	reg("ops", func(_ reps.Config, env reps.Env, rng *rand.Rand) reps.Balancer { return reps.NewOPS(env, rng) })
	reg("plb", func(c reps.Config, env reps.Env, rng *rand.Rand) reps.Balancer { return reps.NewPLB(c, env, rng) })
	reg("flowlet", func(c reps.Config, env reps.Env, rng *rand.Rand) reps.Balancer { return reps.NewFlowlet(c, env, rng) })
	reg("mptcp", func(c reps.Config, env reps.Env, rng *rand.Rand) reps.Balancer { return reps.NewMPTCP(c, env, rng) })
}

// lbEnv is what a balancer learns from the endpoint's configuration.
func lbEnv(cfg *Config) reps.Env {
	n := cfg.Network()
	return reps.Env{EVS: cfg.EVS, BDPPackets: int((n.BDP() + int64(cfg.MTU) - 1) / int64(cfg.MTU)),
		BaseRTT: int64(cfg.BaseRTT), Trimming: cfg.Trimming}
}
