package bedrun

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/sim"
	"github.com/smartt-transport/smartt/transport"
)

// DefaultSoakYAML is the soak scenario scenarios/soak.yaml: the defaults of every soak
// scenario and what `smartt-lab testbed soak` runs without a file.
//
//go:embed scenarios/soak.yaml
var DefaultSoakYAML []byte

// SoakScenario is a soak: the fabric and transport as in a simulator scenario, and the
// soak block (workload, faults, checks). It is read from YAML over DefaultSoakYAML.
type SoakScenario struct {
	Name               string             `yaml:"name"`
	Seed               uint64             `yaml:"seed"`
	Topology           sim.TopologyConfig `yaml:"topology"`
	Transport          transport.Config   `yaml:"transport"`
	RoutingConvergence config.Duration    `yaml:"routing_convergence"`
	Soak               SoakConfig         `yaml:"soak"`
}

// SoakConfig is the soak block: a mixed workload for Duration, faults during it, then a
// drain, the exactly-once tally and the memory check.
type SoakConfig struct {
	Duration config.Duration `yaml:"duration"` // the workload submits messages this long
	Drain    config.Duration `yaml:"drain"`    // then at most this long for outcomes and deliveries
	Warmup   config.Duration `yaml:"warmup"`   // no fault before
	Cooldown config.Duration `yaml:"cooldown"` // no fault in the last Cooldown of the workload
	// Epoch is how long each traffic pattern lasts; Patterns (permutation, incast,
	// all_to_all) take turns in this order.
	Epoch    config.Duration `yaml:"epoch"`
	Patterns []string        `yaml:"patterns"`
	// Rate is the background messages per second per host (Poisson arrivals), their sizes
	// drawn from Sizes.
	Rate  float64     `yaml:"rate"`
	Sizes []SizeClass `yaml:"sizes"`
	// MaxOutstanding bounds a host's messages without an outcome; the host waits beyond.
	MaxOutstanding int             `yaml:"max_outstanding"`
	Incast         BurstConfig     `yaml:"incast"`     // incast epochs: every other host to the victim at once
	AllToAll       BurstConfig     `yaml:"all_to_all"` // all-to-all epochs: every host to every other at once
	Flaky          FlakyConfig     `yaml:"flaky"`
	Flaps          FlapConfig      `yaml:"flaps"`
	Restart        RestartConfig   `yaml:"restart"`
	Memory         MemoryConfig    `yaml:"memory"`
	Progress       config.Duration `yaml:"progress"` // progress line interval (0: none)
}

// SizeClass is a class of background message sizes: chosen with probability
// Weight / (sum of weights), log-uniform in [Min, Max].
type SizeClass struct {
	Weight float64  `yaml:"weight"`
	Min    sim.Size `yaml:"min"`
	Max    sim.Size `yaml:"max"`
}

// BurstConfig is a synchronised burst every Every (0: none) of messages of Size.
type BurstConfig struct {
	Every config.Duration `yaml:"every"`
	Size  sim.Size        `yaml:"size"`
}

// FlakyConfig: in every slot of length Every, Links links drawn at random (host links
// included) lose every frame leaving in a loss burst (Fabric.Flaky: exponential gaps of
// mean Gap, bursts of mean Burst); healed at the slot's end. Links 0: none.
type FlakyConfig struct {
	Every config.Duration `yaml:"every"`
	Links int             `yaml:"links"`
	Gap   config.Duration `yaml:"gap"`
	Burst config.Duration `yaml:"burst"`
}

// FlapConfig: every Every (0: none) a fabric link drawn at random goes down for a time
// drawn in [MinDown, MaxDown] and comes back (routing converges routing_convergence after
// each change); every HostEvery-th flap (0: never) is a host link instead, down for at
// most HostMaxDown.
type FlapConfig struct {
	Every       config.Duration `yaml:"every"`
	MinDown     config.Duration `yaml:"min_down"`
	MaxDown     config.Duration `yaml:"max_down"`
	HostEvery   int             `yaml:"host_every"`
	HostMaxDown config.Duration `yaml:"host_max_down"`
}

// RestartConfig: host Host's daemon (-1: drawn from the seed) is killed — its socket goes
// silent at once, its application's session ends, its state is gone — Offset after the
// first burst at or after At × duration (or at At × duration if no burst comes before
// the cooldown), so that messages are in flight to and from it; a new daemon starts on
// the same address Down later. At 0: no restart.
type RestartConfig struct {
	At     float64         `yaml:"at"`
	Offset config.Duration `yaml:"offset"`
	Down   config.Duration `yaml:"down"`
	Host   int             `yaml:"host"`
}

// MemoryConfig: the process's memory and the daemons' gauges are sampled every Interval;
// after the drain the live heap (after a forced GC) may exceed the one before the
// workload by at most MaxGrowthPerHost per host (what each engine may keep for reuse, the
// soak's records, slack), and the goroutines by at most MaxGoroutines.
type MemoryConfig struct {
	Interval         config.Duration `yaml:"interval"`
	MaxGrowthPerHost sim.Size        `yaml:"max_growth_per_host"`
	MaxGoroutines    int             `yaml:"max_goroutines"`
}

// LoadSoak reads a soak scenario file over the defaults (DefaultSoakYAML).
func LoadSoak(path string) (*SoakScenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sc, err := ParseSoak(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return sc, nil
}

// ParseSoak decodes a soak scenario strictly (unknown fields are errors) over the defaults
// (DefaultSoakYAML; nil b: the defaults alone) and checks it.
func ParseSoak(b []byte) (*SoakScenario, error) {
	sc := &SoakScenario{Seed: 1}
	sc.Transport = transport.DefaultConfig()
	sc.Transport.LinkRate, sc.Transport.BaseRTT = 0, 0
	if err := config.DecodeYAML(DefaultSoakYAML, sc); err != nil {
		return nil, fmt.Errorf("embedded soak.yaml: %w", err)
	}
	if b != nil {
		if err := config.DecodeYAML(b, sc); err != nil {
			return nil, err
		}
	}
	return sc, sc.Check()
}

// scenario is the simulator scenario Map translates for the testbed (the soak has its own
// workload; the one given here is a placeholder).
func (sc *SoakScenario) scenario() *sim.Scenario {
	return &sim.Scenario{Name: sc.Name, Seed: sc.Seed, Topology: sc.Topology, Transport: sc.Transport,
		RoutingConvergence: sc.RoutingConvergence, Workload: sim.WorkloadConfig{Kind: "permutation", Size: 1}}
}

// soakHeader is the bytes of every soak message ahead of its body: magic, id, CRC-64 of
// the body.
const soakHeader = 20

// maxSoakMessage bounds the soak's message sizes (the daemons take up to 1 GiB).
const maxSoakMessage = 64 << 20

// Check validates the soak block (the topology and transport are checked by Map and the
// daemons).
func (sc *SoakScenario) Check() error {
	c := &sc.Soak
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("soak."+format, a...)) }
	d := c.Duration
	if d <= 0 || d > config.Duration(24*time.Hour) {
		bad("duration = %v: must be in (0, 24h]", d)
	}
	if c.Drain <= 0 {
		bad("drain = %v: must be > 0", c.Drain)
	}
	if c.Warmup < 0 || c.Cooldown < 0 || c.Warmup+c.Cooldown >= d {
		bad("warmup (%v) and cooldown (%v): must be >= 0 and leave time for faults within the duration (%v)", c.Warmup, c.Cooldown, d)
	}
	if c.Epoch <= 0 {
		bad("epoch = %v: must be > 0", c.Epoch)
	}
	if len(c.Patterns) == 0 {
		bad("patterns: need at least one of permutation, incast, all_to_all")
	}
	for _, p := range c.Patterns {
		if !slices.Contains([]string{"permutation", "incast", "all_to_all"}, p) {
			bad("patterns: %q: want permutation, incast or all_to_all", p)
		}
	}
	if c.Rate < 0 || c.Rate > 1000 || math.IsNaN(c.Rate) {
		bad("rate = %v: must be in [0, 1000] messages per second per host", c.Rate)
	}
	if c.Rate > 0 && len(c.Sizes) == 0 {
		bad("sizes: need at least one class when rate > 0")
	}
	for i, s := range c.Sizes {
		if !(s.Weight > 0) || s.Min < soakHeader || s.Max < s.Min || s.Max > maxSoakMessage {
			bad("sizes[%d]: need weight > 0 and %d <= min <= max <= %d (got %v, %d, %d)", i, soakHeader, maxSoakMessage, s.Weight, s.Min, s.Max)
		}
	}
	if c.MaxOutstanding < 1 || c.MaxOutstanding > 4096 {
		bad("max_outstanding = %d: must be in 1..4096", c.MaxOutstanding)
	}
	for _, b := range []struct {
		name string
		c    BurstConfig
	}{{"incast", c.Incast}, {"all_to_all", c.AllToAll}} {
		if b.c.Every < 0 || (b.c.Every > 0 && (b.c.Size < soakHeader || b.c.Size > maxSoakMessage)) {
			bad("%s: need every >= 0 and, when every > 0, %d <= size <= %d", b.name, soakHeader, maxSoakMessage)
		}
	}
	if f := c.Flaky; f.Links < 0 || (f.Links > 0 && (f.Every <= 0 || f.Gap <= 0 || f.Burst <= 0)) {
		bad("flaky: need links >= 0 and, when links > 0, every, gap and burst > 0")
	}
	if f := c.Flaps; f.Every < 0 || (f.Every > 0 && (f.MinDown <= 0 || f.MaxDown < f.MinDown || f.MaxDown >= f.Every ||
		f.HostEvery < 0 || (f.HostEvery > 0 && (f.HostMaxDown < f.MinDown || f.HostMaxDown >= f.Every)))) {
		bad("flaps: need every >= 0 and, when every > 0, 0 < min_down <= max_down < every, host_every >= 0 and min_down <= host_max_down < every")
	}
	if r := c.Restart; r.At < 0 || r.At >= 1 || r.Offset < 0 || (r.At > 0 && (r.Down <= 0 || config.Duration(r.At*float64(d))+r.Down > d-c.Cooldown)) {
		bad("restart: need 0 <= at < 1 (0: no restart), offset >= 0 and, when at > 0, down > 0 with at x duration + down before the cooldown")
	}
	if m := c.Memory; m.Interval <= 0 || m.MaxGrowthPerHost <= 0 || m.MaxGoroutines < 0 {
		bad("memory: need interval > 0, max_growth_per_host > 0, max_goroutines >= 0")
	}
	if c.Progress < 0 {
		bad("progress = %v: must be >= 0", c.Progress)
	}
	return errors.Join(errs...)
}

// soakEvent is a scheduled fault of a soak.
type soakEvent struct {
	At    time.Duration
	Kind  string // flaky, heal, down, up, kill, restart
	Link  string
	Host  int
	Gap   time.Duration // flaky
	Burst time.Duration // flaky
	Seed  uint64        // flaky: the loss process's seed
}

func (e soakEvent) String() string {
	switch e.Kind {
	case "flaky":
		return fmt.Sprintf("flaky %s (gap %v, burst %v)", e.Link, e.Gap, e.Burst)
	case "kill", "restart":
		return fmt.Sprintf("%s h%d's daemon", e.Kind, e.Host)
	}
	return e.Kind + " " + e.Link
}

// order puts the end of a fault before the start of the next at the same time.
func (e soakEvent) order() int {
	switch e.Kind {
	case "heal", "up":
		return 0
	case "restart":
		return 1
	}
	return 2
}

// schedule draws the soak's faults from the seed: flaky slots, flaps and the restart,
// all between warmup and duration - cooldown. links are the testbed's links, hostLink
// says which have a host end; hosts is the number of hosts; bursts are plan's.
func (c *SoakConfig) schedule(seed uint64, links []string, hostLink func(string) bool, hosts int, bursts []burst) []soakEvent {
	rng := rand.New(rand.NewPCG(seed, 0x50a4fa17))
	d, warm, end := time.Duration(c.Duration), time.Duration(c.Warmup), time.Duration(c.Duration-c.Cooldown)
	var evs []soakEvent
	var fabric, hostLinks []string
	for _, l := range links {
		if hostLink(l) {
			hostLinks = append(hostLinks, l)
		} else {
			fabric = append(fabric, l)
		}
	}
	if f := c.Flaky; f.Links > 0 {
		slot := 0
		for t := warm; t < end; t += time.Duration(f.Every) {
			u := min(t+time.Duration(f.Every), end)
			for _, i := range rng.Perm(len(links))[:min(f.Links, len(links))] {
				evs = append(evs, soakEvent{At: t, Kind: "flaky", Link: links[i], Gap: time.Duration(f.Gap), Burst: time.Duration(f.Burst),
					Seed: seed ^ uint64(slot+1)<<32},
					soakEvent{At: u, Kind: "heal", Link: links[i]})
			}
			slot++
		}
	}
	if f := c.Flaps; f.Every > 0 {
		every := time.Duration(f.Every)
		for j, t := 0, warm+every/2; ; j, t = j+1, t+every {
			host := len(fabric) == 0 || (f.HostEvery > 0 && (j+1)%f.HostEvery == 0)
			lo, hi := time.Duration(f.MinDown), time.Duration(f.MaxDown)
			pool := fabric
			if host {
				hi, pool = time.Duration(f.HostMaxDown), hostLinks
				if f.HostEvery == 0 {
					hi = time.Duration(f.MaxDown)
				}
			}
			down := lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
			if t+down > end {
				break
			}
			l := pool[rng.IntN(len(pool))]
			evs = append(evs, soakEvent{At: t, Kind: "down", Link: l}, soakEvent{At: t + down, Kind: "up", Link: l})
		}
	}
	if r := c.Restart; r.At > 0 {
		h := r.Host
		if h < 0 || h >= hosts {
			h = rng.IntN(hosts)
		}
		at := time.Duration(r.At * float64(d))
		for _, b := range bursts {
			if b.At >= at {
				if t := b.At + time.Duration(r.Offset); t+time.Duration(r.Down) <= end {
					at = t
				}
				break
			}
		}
		evs = append(evs, soakEvent{At: at, Kind: "kill", Host: h}, soakEvent{At: at + time.Duration(r.Down), Kind: "restart", Host: h})
	}
	slices.SortStableFunc(evs, func(a, b soakEvent) int {
		if a.At != b.At {
			return int(a.At - b.At)
		}
		return a.order() - b.order()
	})
	return evs
}

// epochPlan is one epoch's traffic pattern.
type epochPlan struct {
	pattern string
	perm    []int // permutation: each host's destination (a derangement)
	victim  int   // incast: the destination of every other host
}

// plannedMsg is a message the workload will submit.
type plannedMsg struct {
	dst  int
	size int
	kind uint8 // msgBackground, msgIncast, msgAllToAll
}

const (
	msgBackground = iota
	msgIncast
	msgAllToAll
	msgKinds
)

var kindNames = [msgKinds]string{"background", "incast bursts", "all-to-all bursts"}

// burst is a synchronised burst: at At, every listed (src, dst) pair gets a message.
type burst struct {
	At   time.Duration
	Kind uint8
	Size int
	Src  []int // per message
	Dst  []int
}

// plan draws the epochs' patterns and the bursts.
func (c *SoakConfig) plan(seed uint64, hosts int) ([]epochPlan, []burst) {
	rng := rand.New(rand.NewPCG(seed, 0xe90c4))
	d, ep := time.Duration(c.Duration), time.Duration(c.Epoch)
	var eps []epochPlan
	var bs []burst
	for e := 0; time.Duration(e)*ep < d; e++ {
		p := epochPlan{pattern: c.Patterns[e%len(c.Patterns)], victim: rng.IntN(hosts)}
		// A random cyclic derangement: every host sends to one other and hears from one.
		order := rng.Perm(hosts)
		p.perm = make([]int, hosts)
		for i := range order {
			p.perm[order[i]] = order[(i+1)%hosts]
		}
		eps = append(eps, p)
		t0, t1 := time.Duration(e)*ep, min(time.Duration(e+1)*ep, d)
		switch {
		case p.pattern == "incast" && c.Incast.Every > 0:
			for t := t0; t < t1; t += time.Duration(c.Incast.Every) {
				b := burst{At: t, Kind: msgIncast, Size: int(c.Incast.Size)}
				for h := range hosts {
					if h != p.victim {
						b.Src, b.Dst = append(b.Src, h), append(b.Dst, p.victim)
					}
				}
				bs = append(bs, b)
			}
		case p.pattern == "all_to_all" && c.AllToAll.Every > 0:
			for t := t0; t < t1; t += time.Duration(c.AllToAll.Every) {
				b := burst{At: t, Kind: msgAllToAll, Size: int(c.AllToAll.Size)}
				for k := 1; k < hosts; k++ { // round k: every host to the k-th after it
					for h := range hosts {
						b.Src, b.Dst = append(b.Src, h), append(b.Dst, (h+k)%hosts)
					}
				}
				bs = append(bs, b)
			}
		}
	}
	return eps, bs
}

// background draws host h's background messages: Poisson arrivals at Rate, sizes from
// Sizes, destinations by the pattern of the arrival's epoch.
type background struct {
	c    *SoakConfig
	eps  []epochPlan
	h, n int
	rng  *rand.Rand
	next time.Duration
	wsum float64
}

func newBackground(c *SoakConfig, eps []epochPlan, seed uint64, h, hosts int) *background {
	g := &background{c: c, eps: eps, h: h, n: hosts, rng: rand.New(rand.NewPCG(seed, 0xb6+uint64(h)<<8))}
	for _, s := range c.Sizes {
		g.wsum += s.Weight
	}
	g.next = g.gap()
	return g
}

func (g *background) gap() time.Duration {
	if g.c.Rate <= 0 {
		return 1 << 62
	}
	return time.Duration(g.rng.ExpFloat64() / g.c.Rate * 1e9)
}

// pop returns the next background message and its time, and draws the one after.
func (g *background) pop() (time.Duration, plannedMsg) {
	t := g.next
	g.next += g.gap()
	x := g.rng.Float64() * g.wsum
	sc := g.c.Sizes[len(g.c.Sizes)-1]
	for _, s := range g.c.Sizes {
		if x < s.Weight {
			sc = s
			break
		}
		x -= s.Weight
	}
	lo, hi := math.Log(float64(sc.Min)), math.Log(float64(sc.Max))
	size := int(math.Round(math.Exp(lo + g.rng.Float64()*(hi-lo))))
	size = min(max(size, int(sc.Min)), int(sc.Max))
	other := func() int { return (g.h + 1 + g.rng.IntN(g.n-1)) % g.n }
	dst := other()
	if e := int(t / time.Duration(g.c.Epoch)); e < len(g.eps) {
		switch p := g.eps[e]; p.pattern {
		case "permutation":
			dst = p.perm[g.h]
		case "incast":
			if g.h != p.victim {
				dst = p.victim
			}
		}
	}
	return t, plannedMsg{dst: dst, size: size, kind: msgBackground}
}
