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

// CCNeeds are the network features a congestion controller relies on (Linux's
// TCP_CONG_NEEDS_ECN). NewEndpoint refuses a controller that needs trimming or INT when
// the configuration says they are absent; whether switches mark ECN only the driver
// knows, so ECN is checked by the simulator against its queues.
type CCNeeds struct {
	ECN      bool // switches mark CE (RED/ECN); the controller reads ECN
	Trimming bool // switches trim packets instead of dropping them
	INT      bool // in-band network telemetry in the packets
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
	// Needs declares the network features the controller relies on.
	Needs CCNeeds
	// Credit names the receiver-driven credit mechanism (credit.go) the controller sends
	// against: an endpoint running it paces PULL packets for its peers (EQDS:
	// credit_eqds.go), and its connections send only against the credit those grant.
	// "": sender-driven.
	Credit string
}

// LBRegistration is one load balancer's row of the registry, in the shape of a
// controller's: Prepare runs once per endpoint and returns the per-connection
// constructor.
type LBRegistration struct {
	// Name is the value of Config.LB that selects the balancer.
	Name string
	// Prepare validates the configuration and returns the per-connection constructor.
	Prepare func(cfg *Config) (func(rng *rand.Rand) reps.Balancer, error)
}

// registry is the one shape of the engine's pluggable parts: a name registers once,
// at init, and every reader looks it up by the configuration's name.
type registry[R any] map[string]*R

// add registers r under name; it panics on an empty or duplicate name or a missing
// Prepare (a programming error found at start-up, as Linux's
// tcp_register_congestion_control refuses them).
func (g registry[R]) add(kind, name string, r R, hasPrepare bool) {
	switch {
	case name == "":
		panic("transport: register " + kind + ": empty name")
	case !hasPrepare:
		panic("transport: register " + kind + " " + name + ": no Prepare")
	}
	if _, dup := g[name]; dup {
		panic("transport: register " + kind + " " + name + ": registered twice")
	}
	g[name] = &r
}

// lookup returns the named registration, or an error naming the field and the choices.
func (g registry[R]) lookup(field, name string) (*R, error) {
	r, ok := g[name]
	if !ok {
		return nil, fmt.Errorf("%s = %q: must be one of %s", field, name, strings.Join(sortedKeys(g), ", "))
	}
	return r, nil
}

var (
	ccRegistry = registry[CCRegistration]{}
	lbRegistry = registry[LBRegistration]{}
)

// registerCC adds a controller to the registry (registry.add's panics).
func registerCC(r CCRegistration) { ccRegistry.add("cc", r.Name, r, r.Prepare != nil) }

// registerLB adds a load balancer to the registry (registry.add's panics).
func registerLB(r LBRegistration) { lbRegistry.add("lb", r.Name, r, r.Prepare != nil) }

// LookupCC returns the registration of the named controller.
func LookupCC(name string) (CCRegistration, bool) {
	r, ok := ccRegistry[name]
	if !ok {
		return CCRegistration{}, false
	}
	return *r, true
}

// LookupLB returns the registration of the named load balancer.
func LookupLB(name string) (LBRegistration, bool) {
	r, ok := lbRegistry[name]
	if !ok {
		return LBRegistration{}, false
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

func init() {
	registerCC(CCRegistration{
		Name: "fixed",
		Prepare: func(cfg *Config) (func() cc.Controller, error) {
			w := cfg.InitialWindow
			return func() cc.Controller { return &cc.Fixed{Bytes: w} }, nil
		},
	})
	registerLB(LBRegistration{Name: "ecmp", Prepare: func(cfg *Config) (func(rng *rand.Rand) reps.Balancer, error) {
		evs := cfg.EVS
		return func(rng *rand.Rand) reps.Balancer { return reps.NewECMP(rng, evs) }, nil
	}})
}

// CCNames lists the congestion controllers Config.CC may name.
func CCNames() []string { return sortedKeys(ccRegistry) }

// LBNames lists the load balancers Config.LB may name.
func LBNames() []string { return sortedKeys(lbRegistry) }

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
	r, err := ccRegistry.lookup("cc", c.CC)
	if err != nil {
		return nil, err
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

// prepareLB runs the named load balancer's Prepare.
func (c *Config) prepareLB() (func(rng *rand.Rand) reps.Balancer, error) {
	r, err := lbRegistry.lookup("lb", c.LB)
	if err != nil {
		return nil, err
	}
	f, err := r.Prepare(c)
	if err != nil {
		return nil, fmt.Errorf("lb = %q: %w", c.LB, err)
	}
	return f, nil
}
