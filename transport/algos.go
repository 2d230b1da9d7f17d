package transport

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/reps"
)

// ccByName builds a connection's congestion controller from the endpoint's config, by
// the name in Config.CC. Add an algorithm here with one line.
var ccByName = map[string]func(cfg *Config) cc.Controller{
	"fixed": func(cfg *Config) cc.Controller { return &cc.Fixed{Bytes: cfg.InitialWindow} },
}

// lbByName builds a connection's load balancer, by the name in Config.LB.
var lbByName = map[string]func(cfg *Config, rng *rand.Rand) reps.Balancer{
	"ecmp": func(cfg *Config, rng *rand.Rand) reps.Balancer { return reps.NewECMP(rng, cfg.EVS) },
}

// CCNames lists the congestion controllers Config.CC may name.
func CCNames() []string { return sortedKeys(ccByName) }

// LBNames lists the load balancers Config.LB may name.
func LBNames() []string { return sortedKeys(lbByName) }

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Network returns the path parameters congestion control derives its constants from.
func (c *Config) Network() config.Network {
	return config.Network{LinkRate: int64(c.LinkRate), BaseRTT: int64(c.BaseRTT), MTU: c.MTU}
}

// resolveAlgorithms fills NewCC and NewBalancer from the CC and LB names when the caller
// did not supply constructors.
func (c *Config) resolveAlgorithms() error {
	if c.NewCC == nil {
		f, ok := ccByName[c.CC]
		if !ok {
			return fmt.Errorf("cc = %q: must be one of %s", c.CC, strings.Join(CCNames(), ", "))
		}
		cfg := *c
		c.NewCC = func() cc.Controller { return f(&cfg) }
	}
	if c.NewBalancer == nil {
		f, ok := lbByName[c.LB]
		if !ok {
			return fmt.Errorf("lb = %q: must be one of %s", c.LB, strings.Join(LBNames(), ", "))
		}
		cfg := *c
		c.NewBalancer = func(rng *rand.Rand) reps.Balancer { return f(&cfg, rng) }
	}
	return nil
}
