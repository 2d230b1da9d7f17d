package transport

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/hwprofile"
	"github.com/smartt-transport/smartt/reps"
)

// CCNeeds are the network features a congestion controller relies on (Linux's
// TCP_CONG_NEEDS_ECN): NewEndpoint refuses a controller whose needs the configuration
// says are absent, and the simulator and the daemon's capability probe read them.
type CCNeeds struct {
	ECN      bool // switches mark CE (RED/ECN); the controller reads ECN
	Trimming bool // switches trim packets instead of dropping them
	INT      bool // in-band network telemetry in the packets
	Lossless bool // a lossless (PFC) fabric
}

// CCRegistration is one congestion controller's row of the registry: every name
// registers once, and NewEndpoint, Config.Validate, the daemon, the simulator and
// `smartt-lab hwprofile report` all read this one table.
type CCRegistration struct {
	// Name is the value of Config.CC that selects the controller.
	Name string
	// Prepare validates the configuration and derives the controller's parameters once
	// per endpoint; the per-connection constructor it returns cannot fail.
	Prepare func(cfg *Config) (func() cc.Controller, error)
	// Cost reports the hardware-profile cost of one connection's controller.
	Cost func(ctl cc.Controller) hwprofile.Cost
	// Needs declares the network features the controller relies on.
	Needs CCNeeds
	// ReceiverDriven: the receiver schedules the senders (EQDS): an endpoint running
	// the controller paces PULL packets for its peers (algos_eqds.go), and its
	// connections send only against the credit those grant.
	ReceiverDriven bool
}

var ccRegistry = map[string]*CCRegistration{}

// registerCC adds a controller to the registry; it panics on a duplicate name or a
// missing field (a programming error found at start-up, as Linux's
// tcp_register_congestion_control refuses them).
func registerCC(r CCRegistration) {
	switch {
	case r.Name == "":
		panic("transport: registerCC: empty name")
	case r.Prepare == nil:
		panic("transport: registerCC " + r.Name + ": no Prepare")
	case r.Cost == nil:
		panic("transport: registerCC " + r.Name + ": no Cost")
	}
	if _, dup := ccRegistry[r.Name]; dup {
		panic("transport: registerCC " + r.Name + ": registered twice")
	}
	ccRegistry[r.Name] = &r
}

// LookupCC returns the registration of the named controller.
func LookupCC(name string) (CCRegistration, bool) {
	r, ok := ccRegistry[name]
	if !ok {
		return CCRegistration{}, false
	}
	return *r, true
}

// statsReporter finds a controller's optional cc.StatsReporter once per connection,
// looking through wrappers (the daemon's decision timer) that expose what they wrap.
func statsReporter(ctl cc.Controller) cc.StatsReporter {
	for {
		if q, ok := ctl.(cc.StatsReporter); ok {
			return q
		}
		u, ok := ctl.(interface{ Unwrap() cc.Controller })
		if !ok {
			return nil
		}
		ctl = u.Unwrap()
	}
}

// costOf is the Cost of a registration whose controller implements hwprofile.Coster.
func costOf(ctl cc.Controller) hwprofile.Cost {
	if c, ok := ctl.(hwprofile.Coster); ok {
		return c.Cost()
	}
	return hwprofile.Cost{Name: fmt.Sprintf("%T", ctl)}
}

func init() {
	registerCC(CCRegistration{
		Name: "fixed",
		Prepare: func(cfg *Config) (func() cc.Controller, error) {
			w := cfg.InitialWindow
			return func() cc.Controller { return &cc.Fixed{Bytes: w} }, nil
		},
		Cost: costOf,
	})
}

// lbByName builds a connection's load balancer, by the name in Config.LB.
var lbByName = map[string]func(cfg *Config, rng *rand.Rand) reps.Balancer{
	"ecmp": func(cfg *Config, rng *rand.Rand) reps.Balancer { return reps.NewECMP(rng, cfg.EVS) },
}

// CCNames lists the congestion controllers Config.CC may name.
func CCNames() []string { return sortedKeys(ccRegistry) }

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

// prepareCC runs the named controller's Prepare and checks its needs against the
// configuration.
func (c *Config) prepareCC() (func() cc.Controller, error) {
	r, ok := ccRegistry[c.CC]
	if !ok {
		return nil, fmt.Errorf("cc = %q: must be one of %s", c.CC, strings.Join(CCNames(), ", "))
	}
	if r.Needs.Trimming && !c.Trimming {
		return nil, fmt.Errorf("cc = %q: needs trimming switches (trimming = false)", c.CC)
	}
	if r.Needs.INT && !c.INT {
		return nil, fmt.Errorf("cc = %q: needs switches that stamp in-band telemetry (int = false)", c.CC)
	}
	f, err := r.Prepare(c)
	if err != nil {
		return nil, fmt.Errorf("cc = %q: %w", c.CC, err)
	}
	return f, nil
}

// resolveAlgorithms fills NewCC and NewBalancer from the CC and LB names when the caller
// did not supply constructors.
func (c *Config) resolveAlgorithms() error {
	if c.NewCC == nil {
		f, err := c.prepareCC()
		if err != nil {
			return err
		}
		c.NewCC = f
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
