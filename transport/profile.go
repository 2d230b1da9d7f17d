package transport

import (
	"math/rand/v2"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/hwprofile"
	"github.com/smartt-transport/smartt/reps"
)

// checkProfile builds one instance of the CC and LB h resolved and checks their cost
// against Config.Profile. The LB gets a throwaway random source so that checking does
// not change the endpoint's random sequence.
func (c *Config) checkProfile(h *Hooks) error {
	if c.Profile == "" {
		return nil
	}
	p, err := hwprofile.Lookup(c.Profile)
	if err != nil {
		return err
	}
	ccName, lbName := c.CC, c.LB
	ctl := h.NewCC()
	bal := h.NewBalancer(rand.New(rand.NewPCG(0, 0)))
	return p.CheckPair(ccName, ctl, lbName, bal)
}

// NewCC builds one congestion controller by name, as a connection of an endpoint with cfg
// would get it (for reports and tools).
func NewCC(name string, cfg Config) (cc.Controller, error) {
	cfg.CC = name
	f, err := cfg.prepareCC()
	if err != nil {
		return nil, err
	}
	return f(), nil
}

// NewLB builds one load balancer by name, as NewCC.
func NewLB(name string, cfg Config, rng *rand.Rand) (reps.Balancer, error) {
	cfg.LB = name
	f, err := cfg.prepareLB()
	if err != nil {
		return nil, err
	}
	return f(rng), nil
}
