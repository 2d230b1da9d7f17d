package transport

import (
	"fmt"
	"math/rand/v2"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/hwprofile"
	"github.com/smartt-transport/smartt/reps"
)

// ccCheck validates a named controller's configuration before any connection is made
// (constructors cannot return errors); algorithms register here beside ccByName.
var ccCheck = map[string]func(cfg *Config) error{}

// lbCheck is ccCheck for load balancers.
var lbCheck = map[string]func(cfg *Config) error{}

// checkAlgorithms runs the named algorithms' configuration checks.
func (c *Config) checkAlgorithms() error {
	if c.NewCC == nil {
		if f := ccCheck[c.CC]; f != nil {
			if err := f(c); err != nil {
				return fmt.Errorf("cc = %q: %w", c.CC, err)
			}
		}
	}
	if c.NewBalancer == nil {
		if f := lbCheck[c.LB]; f != nil {
			if err := f(c); err != nil {
				return fmt.Errorf("lb = %q: %w", c.LB, err)
			}
		}
	}
	return nil
}

// checkProfile builds one instance of the configured CC and LB and checks their cost
// against Config.Profile. The LB gets a throwaway random source so that checking does
// not change the endpoint's random sequence.
func (c *Config) checkProfile() error {
	if c.Profile == "" {
		return nil
	}
	p, err := hwprofile.Lookup(c.Profile)
	if err != nil {
		return err
	}
	ccName, lbName := c.CC, c.LB
	ctl := c.NewCC()
	bal := c.NewBalancer(rand.New(rand.NewPCG(0, 0)))
	return p.CheckPair(ccName, ctl, lbName, bal)
}

// NewCC builds one congestion controller by name, as a connection of an endpoint with cfg
// would get it (for reports and tools).
func NewCC(name string, cfg Config) (cc.Controller, error) {
	cfg.CC, cfg.NewCC = name, nil
	if err := cfg.checkAlgorithms(); err != nil {
		return nil, err
	}
	if err := cfg.resolveAlgorithms(); err != nil {
		return nil, err
	}
	return cfg.NewCC(), nil
}

// NewLB builds one load balancer by name, as NewCC.
func NewLB(name string, cfg Config, rng *rand.Rand) (reps.Balancer, error) {
	cfg.LB, cfg.NewBalancer = name, nil
	if err := cfg.checkAlgorithms(); err != nil {
		return nil, err
	}
	if err := cfg.resolveAlgorithms(); err != nil {
		return nil, err
	}
	return cfg.NewBalancer(rng), nil
}
