package sim

import (
	"fmt"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/switchport"
)

// TopologyConfig describes the fabric. Kinds:
//
//   - "single": every host on one switch (incast).
//   - "fattree2": ToRs with radix/2 host ports and radix/2/oversubscription uplinks, one
//     to each spine; spines reach every ToR.
//   - "fattree3": k-ary fat tree (k = radix): pods of k/2 ToRs with k/2 hosts each,
//     radix/2/oversubscription aggregation switches per pod (one uplink from every ToR
//     to each), each aggregation switch with k/2 uplinks to its group of k/2 cores.
//     radix 16 gives 1024 hosts at 1:1; fewer hosts use fewer pods.
//   - "leafspine": Leaves leaf switches, Spines spines, hosts split evenly over leaves.
//
// Oversubscription (1..8) is the ratio of host ports to uplinks at the ToR.
type TopologyConfig struct {
	Kind             string          `yaml:"kind"`             // single, fattree2, fattree3, leafspine
	Hosts            int             `yaml:"hosts"`            // number of hosts
	Radix            int             `yaml:"radix"`            // switch radix (fat trees)
	Oversubscription int             `yaml:"oversubscription"` // ToR host ports per uplink, 1..8 (default 1)
	Leaves           int             `yaml:"leaves"`           // leaf switches (leafspine)
	Spines           int             `yaml:"spines"`           // spine switches (leafspine)
	LinkRate         config.Rate     `yaml:"link_rate"`        // every link (default 100 Gbit/s)
	LinkLatency      config.Duration `yaml:"link_latency"`     // propagation per link
	SwitchLatency    config.Duration `yaml:"switch_latency"`   // traversal per switch
	Queue            QueueConfig     `yaml:"queue"`            // every switch output port
	// Routing is how switches choose among their up ports: ecmp (default: a hash of the
	// 5-tuple, so the host's EV picks the path), spray (a random up port per packet at
	// every switch, whatever the EV), round_robin (each switch's up ports in turn) or
	// adaptive (the up port with the fewest bytes queued, ties broken by the hash): the
	// switch-side balancers of the AI-training study. adaptive_random breaks the ties
	// at random per packet (from the switch's seeded sequence) instead.
	Routing string `yaml:"routing"`
}

// QueueConfig sizes every switch output port.
type QueueConfig struct {
	// Bytes is the data-queue size; 0: BDPs times the bandwidth-delay product of the
	// longest path.
	Bytes int `yaml:"bytes"`
	// BDPs sizes the data queue in bandwidth-delay products when Bytes is 0 (default 1).
	BDPs float64 `yaml:"bdps"`
	// ControlBytes is the control-queue size (0: same as the data queue).
	ControlBytes int `yaml:"control_bytes"`
	// Kmin and Kmax are the RED thresholds as fractions of the data queue (0.2, 0.8).
	Kmin float64 `yaml:"kmin"`
	Kmax float64 `yaml:"kmax"`
	// NoECN turns marking off.
	NoECN bool `yaml:"no_ecn"`
	// Trim cuts packets that find a full data queue (default true; false: drop-tail).
	Trim *bool `yaml:"trim"`
	// TrimBytes is the size of a trimmed packet (0: 64).
	TrimBytes int `yaml:"trim_bytes"`
	// Evict is the probability that a data packet finding the data queue full evicts
	// (trims or drops) the packet at the queue's head instead of being cut itself
	// (0, the default: always the arriving one; htsim: 0.5; switchport.Config.Evict).
	Evict float64 `yaml:"evict"`
	// EvictNewest evicts the most recently queued packet instead of the head.
	EvictNewest bool `yaml:"evict_newest"`
	// ReturnToSender (with Trim) sends a trimmed packet's header back to its sender
	// (addresses swapped, marked returned, at control priority) instead of on to its
	// receiver: the sender reads it as a NACK (transport/rts.go), the receiver never
	// sees the packet. The AI-training study's "RTS" trimming.
	ReturnToSender bool `yaml:"return_to_sender"`
	// TrimmedPriority queues a trimmed header as control traffic (strict priority) at
	// every port after the one that cut it, as htsim and the AI-training study do. false
	// (default, the model the published tables were made with): only the trimming port
	// queues it as control; later ports queue it as a 64-byte data packet (cut again onto
	// the control queue, and counted as a trim again, where the data queue is full).
	TrimmedPriority bool `yaml:"trimmed_priority"`
	// NoINT makes the switches INT-incapable: they stamp no in-band telemetry, and a
	// controller that needs it (hpcc) is refused. Otherwise data packets carrying an INT
	// block (transport.int, set for such controllers) get a record per switch port.
	NoINT bool `yaml:"no_int"`
}

// swtch is one switch with up/down routing: it reaches hosts [lo, hi) downward, span
// hosts per down port, and everything else through its up ports (ECMP).
type swtch struct {
	lo, hi, span int32
	tier         uint8
	down         []int32 // port ids
	up           []int32 // port ids
	salt         uint64
	allowed      []uint64 // after a failure: usable up ports by destination ToR (bit mask); nil: all
	name         string
	rr           uint32 // routing: spray's next up port
}

// topo is a built fabric: nodes 0..hosts-1 are hosts, hosts+i is switch i.
type topo struct {
	hosts       int
	perToR      int // hosts per ToR (destination group for routing after failures)
	rate        int64
	prop        int64
	swLat       int64
	sws         []swtch
	ports       []port
	hostUp      []int32 // host -> ToR node
	maxLinks    int     // links on the longest host-to-host path
	oversub     int
	torUplinks  int // uplinks per ToR
	portByLink  map[[2]int32]int32
	podHosts    int // hosts per pod (3-tier), 0 otherwise
	description string
}

func (t *TopologyConfig) fill() {
	if t.Oversubscription == 0 {
		t.Oversubscription = 1
	}
	if t.LinkRate == 0 {
		t.LinkRate = 100_000_000_000
	}
	if t.Queue.BDPs == 0 {
		t.Queue.BDPs = 1
	}
	if t.Queue.Kmin == 0 && t.Queue.Kmax == 0 {
		t.Queue.Kmin, t.Queue.Kmax = 0.2, 0.8
	}
}

func (t *TopologyConfig) validate() error {
	switch {
	case t.Hosts < 2 || t.Hosts > 1<<20:
		return fmt.Errorf("topology.hosts = %d: must be in 2..%d", t.Hosts, 1<<20)
	case t.Oversubscription < 1 || t.Oversubscription > 8:
		return fmt.Errorf("topology.oversubscription = %d: must be in 1..8", t.Oversubscription)
	case t.LinkRate < 1_000_000:
		return fmt.Errorf("topology.link_rate = %v: must be >= 1Mbit", t.LinkRate)
	case t.LinkLatency < 0 || t.SwitchLatency < 0:
		return fmt.Errorf("topology: link_latency and switch_latency must be >= 0")
	case t.Queue.Kmin < 0 || t.Queue.Kmax > 1 || t.Queue.Kmin >= t.Queue.Kmax:
		return fmt.Errorf("topology.queue: need 0 <= kmin (%v) < kmax (%v) <= 1", t.Queue.Kmin, t.Queue.Kmax)
	case t.Queue.Bytes < 0 || t.Queue.ControlBytes < 0 || t.Queue.BDPs < 0:
		return fmt.Errorf("topology.queue: sizes must be >= 0")
	}
	switch t.Kind {
	case "single", "fattree2", "fattree3", "leafspine":
	default:
		return fmt.Errorf("topology.kind = %q: must be one of single, fattree2, fattree3, leafspine", t.Kind)
	}
	switch t.Routing {
	case "", "ecmp", "spray", "round_robin", "adaptive", "adaptive_random":
	default:
		return fmt.Errorf("topology.routing = %q: must be one of ecmp, spray, round_robin, adaptive, adaptive_random", t.Routing)
	}
	return nil
}

// Switch routing modes (TopologyConfig.Routing).
const (
	routeECMP = iota
	routeSpray
	routeRoundRobin
	routeAdaptive
	routeAdaptiveRandom
)

func routingMode(name string) uint8 {
	switch name {
	case "spray":
		return routeSpray
	case "round_robin":
		return routeRoundRobin
	case "adaptive":
		return routeAdaptive
	case "adaptive_random":
		return routeAdaptiveRandom
	}
	return routeECMP
}

// build lays out switches and ports; queue sizes are set later by sizeQueues.
func (t *TopologyConfig) build(seed uint64) (*topo, error) {
	t.fill()
	if err := t.validate(); err != nil {
		return nil, err
	}
	tp := &topo{hosts: t.Hosts, rate: int64(t.LinkRate), prop: int64(t.LinkLatency), swLat: int64(t.SwitchLatency),
		hostUp: make([]int32, t.Hosts), oversub: t.Oversubscription, portByLink: make(map[[2]int32]int32)}
	H := int32(t.Hosts)
	addSw := func(lo, hi, span int32, tier uint8, name string) int32 {
		salt := switchport.HashWords(seed, uint64(len(tp.sws)), 0x5eed)
		// Round-robin switches start at a random port: counters that all start at 0 send
		// the first packets of every switch up the same path in step.
		tp.sws = append(tp.sws, swtch{lo: lo, hi: hi, span: span, tier: tier, name: name, salt: salt, rr: uint32(salt >> 32)})
		return H + int32(len(tp.sws)-1)
	}
	// link adds the two directions of a link between nodes a and b (b a switch).
	link := func(a, b int32, aDown bool) {
		if a >= H { // a switch: port a->b
			pa := tp.addPort(a, b)
			s := &tp.sws[a-H]
			if aDown {
				s.down = append(s.down, pa)
			} else {
				s.up = append(s.up, pa)
			}
		} else {
			tp.hostUp[a] = b
		}
		pb := tp.addPort(b, a)
		s := &tp.sws[b-H]
		if aDown {
			s.up = append(s.up, pb)
		} else {
			s.down = append(s.down, pb)
		}
	}
	need := func(cond bool, format string, a ...any) error {
		if !cond {
			return fmt.Errorf(format, a...)
		}
		return nil
	}
	switch t.Kind {
	case "single":
		s := addSw(0, H, 1, 0, "sw0")
		for h := range H {
			link(h, s, false)
		}
		tp.perToR, tp.maxLinks = t.Hosts, 2
		tp.description = fmt.Sprintf("single switch, %d hosts", t.Hosts)
	case "fattree2", "leafspine":
		var d, u int
		if t.Kind == "leafspine" {
			if err := need(t.Leaves > 0 && t.Spines > 0 && t.Hosts%t.Leaves == 0,
				"topology: leafspine needs leaves > 0, spines > 0 and hosts (%d) divisible by leaves (%d)", t.Hosts, t.Leaves); err != nil {
				return nil, err
			}
			d, u = t.Hosts/t.Leaves, t.Spines
		} else {
			if err := need(t.Radix >= 2 && t.Radix%2 == 0, "topology.radix = %d: must be even and >= 2", t.Radix); err != nil {
				return nil, err
			}
			d = t.Radix / 2
			if err := need(d%t.Oversubscription == 0 && t.Hosts%d == 0,
				"topology: fattree2 needs radix/2 (%d) divisible by oversubscription (%d) and hosts (%d) divisible by radix/2", d, t.Oversubscription, t.Hosts); err != nil {
				return nil, err
			}
			u = d / t.Oversubscription
		}
		T := t.Hosts / d
		tors := make([]int32, T)
		for i := range T {
			tors[i] = addSw(int32(i*d), int32((i+1)*d), 1, 0, fmt.Sprintf("tor%d", i))
			for h := i * d; h < (i+1)*d; h++ {
				link(int32(h), tors[i], false)
			}
		}
		for j := range u {
			sp := addSw(0, H, int32(d), 1, fmt.Sprintf("spine%d", j))
			for i := range T {
				link(tors[i], sp, false)
			}
		}
		tp.perToR, tp.torUplinks, tp.maxLinks = d, u, 4
		tp.description = fmt.Sprintf("2-tier: %d ToRs x %d hosts, %d spines (%d:1)", T, d, u, d/u)
	case "fattree3":
		if err := need(t.Radix >= 2 && t.Radix%2 == 0, "topology.radix = %d: must be even and >= 2", t.Radix); err != nil {
			return nil, err
		}
		k2 := t.Radix / 2
		d, tpp := k2, k2
		if err := need(d%t.Oversubscription == 0 && t.Hosts%(d*tpp) == 0,
			"topology: fattree3 needs radix/2 (%d) divisible by oversubscription (%d) and hosts (%d) divisible by (radix/2)^2 = %d",
			d, t.Oversubscription, t.Hosts, d*tpp); err != nil {
			return nil, err
		}
		u := d / t.Oversubscription
		P := t.Hosts / (d * tpp)
		aggs := make([][]int32, P)
		for p := range P {
			var tors []int32
			for i := range tpp {
				lo := int32((p*tpp + i) * d)
				tor := addSw(lo, lo+int32(d), 1, 0, fmt.Sprintf("tor%d.%d", p, i))
				tors = append(tors, tor)
				for h := lo; h < lo+int32(d); h++ {
					link(h, tor, false)
				}
			}
			for g := range u {
				lo := int32(p * tpp * d)
				a := addSw(lo, lo+int32(tpp*d), int32(d), 1, fmt.Sprintf("agg%d.%d", p, g))
				aggs[p] = append(aggs[p], a)
				for _, tor := range tors {
					link(tor, a, false)
				}
			}
		}
		for g := range u {
			for j := range k2 {
				c := addSw(0, H, int32(tpp*d), 2, fmt.Sprintf("core%d.%d", g, j))
				for p := range P {
					link(aggs[p][g], c, false)
				}
			}
		}
		tp.perToR, tp.torUplinks, tp.maxLinks, tp.podHosts = d, u, 6, d*tpp
		tp.description = fmt.Sprintf("3-tier: %d pods x %d ToRs x %d hosts, %d aggs/pod, %d cores (%d:1)", P, tpp, d, u, u*k2, t.Oversubscription)
	}
	return tp, nil
}

func (tp *topo) addPort(from, to int32) int32 {
	id := int32(len(tp.ports))
	tp.ports = append(tp.ports, port{portFields: portFields{owner: from, peer: to}})
	tp.portByLink[[2]int32{from, to}] = id
	return id
}

// linksBetween returns the number of links on a shortest path between hosts a and b.
func (tp *topo) linksBetween(a, b int32) int {
	switch {
	case a == b:
		return 0
	case int(a)/tp.perToR == int(b)/tp.perToR:
		return 2
	case tp.podHosts > 0 && int(a)/tp.podHosts == int(b)/tp.podHosts:
		return 4
	}
	return tp.maxLinks
}
