package transport

import (
	"math/rand/v2"

	"github.com/smartt-transport/smartt/reps"
)

// The load balancers of package reps; "ecmp" is registered in algos.go.
func init() {
	lbByName["reps"] = func(cfg *Config, rng *rand.Rand) reps.Balancer { return reps.NewREPS(cfg.REPS, lbEnv(cfg), rng) }
	lbByName["ops"] = func(cfg *Config, rng *rand.Rand) reps.Balancer { return reps.NewOPS(lbEnv(cfg), rng) }
	lbByName["plb"] = func(cfg *Config, rng *rand.Rand) reps.Balancer { return reps.NewPLB(cfg.REPS, lbEnv(cfg), rng) }
	lbByName["flowlet"] = func(cfg *Config, rng *rand.Rand) reps.Balancer { return reps.NewFlowlet(cfg.REPS, lbEnv(cfg), rng) }
	lbByName["mptcp"] = func(cfg *Config, rng *rand.Rand) reps.Balancer { return reps.NewMPTCP(cfg.REPS, lbEnv(cfg), rng) }
}

// lbEnv is what a balancer learns from the endpoint's configuration.
func lbEnv(cfg *Config) reps.Env {
	n := cfg.Network()
	return reps.Env{EVS: cfg.EVS, BDPPackets: int((n.BDP() + int64(cfg.MTU) - 1) / int64(cfg.MTU)),
		BaseRTT: int64(cfg.BaseRTT), Trimming: cfg.Trimming}
}
