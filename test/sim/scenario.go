package sim

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport"
)

// Scenario is one simulation: fabric, transport configuration, workload, failures and
// what to record. It is read from YAML (see docs/sim.md); the transport block takes the
// same fields as the daemon's configuration.
type Scenario struct {
	Name      string           `yaml:"name"`      // shown in results
	Seed      uint64           `yaml:"seed"`      // every random choice derives from it (default 1)
	Topology  TopologyConfig   `yaml:"topology"`  // the fabric
	Transport transport.Config `yaml:"transport"` // every host's engine, as the daemon's config
	Workload  WorkloadConfig   `yaml:"workload"`  // the traffic
	Failures  []FailureConfig  `yaml:"failures"`  // link faults
	// RoutingConvergence is how long after a link goes down (or up) switches keep hashing
	// onto it before routing excludes (re-admits) it (0: at once).
	RoutingConvergence config.Duration `yaml:"routing_convergence"`
	// DecisionLatency emulates a NIC whose congestion-control and load-balancing
	// decisions take time: every ACK, NACK and other control packet reaches the host's
	// engine this much later than it arrives (0: at once).
	DecisionLatency config.Duration `yaml:"decision_latency"`
	// HardwareProfile names an hwprofile profile (cx6dx, fpga-reps) whose decision time
	// is used when DecisionLatency is 0.
	HardwareProfile string `yaml:"hardware_profile"`
	// WireOverhead is added to every datagram for serialisation and queueing (lower-layer
	// headers), bytes.
	WireOverhead int `yaml:"wire_overhead"`
	// ControlWireBytes, if > 0, is the size every control packet (ACK, NACK, probe, close)
	// counts on the wire, for serialisation and queueing, instead of its datagram length
	// plus WireOverhead: 64 accounts ACKs as htsim does (the packets the engines exchange
	// are unchanged).
	ControlWireBytes int `yaml:"control_wire_bytes"`
	// HostLB gives the hosts it lists another balancer than transport.lb (a fabric
	// shared by REPS and ECMP hosts, the REPS paper's Fig. 5). Empty: every host runs
	// transport.lb.
	HostLB HostLBConfig `yaml:"host_lb"`
	// PerFlowBaseRTT gives each connection its own path's base RTT: the transport's
	// smartt.base_rtt_per_hop is filled from the topology (index = switches crossed) and
	// every dialled connection is told its path's switch count (Endpoint.SetPathHops).
	// false (default): every engine uses the longest path's base RTT.
	PerFlowBaseRTT bool `yaml:"per_flow_base_rtt"`
	// Deadline stops the run at this simulated time (0: 10 s).
	Deadline config.Duration `yaml:"deadline"`
	Output   OutputConfig    `yaml:"output"`
	// Sim says how the simulator runs the scenario (shards); the result does not depend on it.
	Sim RunConfig `yaml:"sim"`

	// NewTransport, if set, adjusts each host's transport configuration and engine hooks
	// (tests plug in balancers and controllers here).
	NewTransport func(host int, cfg *transport.Config, h *transport.Hooks) `yaml:"-"`
	// LBName names the balancer in results when NewTransport replaces it.
	LBName string `yaml:"-"`
	// Dir is where relative paths in the scenario (workload.file) are read from:
	// LoadScenario sets it to the file's directory (empty: the working directory).
	Dir string `yaml:"-"`
}

// HostLBConfig names hosts that run another balancer.
type HostLBConfig struct {
	LB    string `yaml:"lb"`    // their balancer (transport.lb's names)
	Hosts []int  `yaml:"hosts"` // host indices, each at most once
}

// set returns the listed hosts as a set after checking them against hosts (nil: none).
func (c HostLBConfig) set(hosts int) (map[int]bool, error) {
	if len(c.Hosts) == 0 {
		if c.LB != "" {
			return nil, fmt.Errorf("host_lb.lb = %q lists no hosts", c.LB)
		}
		return nil, nil
	}
	if c.LB == "" {
		return nil, fmt.Errorf("host_lb.hosts without host_lb.lb")
	}
	set := make(map[int]bool, len(c.Hosts))
	for _, h := range c.Hosts {
		if h < 0 || h >= hosts {
			return nil, fmt.Errorf("host_lb.hosts: host %d: want 0..%d", h, hosts-1)
		}
		if set[h] {
			return nil, fmt.Errorf("host_lb.hosts: host %d listed twice", h)
		}
		set[h] = true
	}
	return set, nil
}

// OutputConfig says what to record beyond the summary.
type OutputConfig struct {
	// SampleInterval samples queue occupancy of the selected ports this often (0: never).
	SampleInterval config.Duration `yaml:"sample_interval"`
	// SamplePorts selects the sampled ports: "hosts" (switch ports toward hosts), "up"
	// (ToR uplinks), "all", or a list of port names "tor0->spine1" separated by commas.
	SamplePorts string `yaml:"sample_ports"`
	// SampleWindows also samples, every SampleInterval, the congestion window of the
	// first this many flows (their sender's connection; 0 once it is gone): window
	// traces such as the SMaRTT paper's Fig. 2.
	SampleWindows int `yaml:"sample_windows"`
	// SampleUtil also records, for every sampled port, the rate it sent at (all bytes it
	// serialised, data and control) over consecutive windows of this length, a multiple
	// of SampleInterval: util.csv and util.png, in Mbit/s (0: off). The REPS paper's
	// Fig. 1 plots ToR uplink utilisation in 20 us buckets.
	SampleUtil config.Duration `yaml:"sample_util"`
	// RTT records the RTT of every ACK a sender's congestion controller is given and
	// reports their distribution (Result.RTT: median, 90th and 99th percentile).
	RTT bool `yaml:"rtt"`
	// MaxSamples bounds the samples kept per port (0: 100000).
	MaxSamples int `yaml:"max_samples"`
	// Progress prints a progress line to stderr every few seconds of wall time.
	Progress bool `yaml:"progress"`
}

// PortSelection parses SamplePorts, the grammar shared by the simulator and the testbed:
// a group ("hosts", the default, "up" or "all", with no ports), or the listed ports as
// (switch, peer) names.
func (oc *OutputConfig) PortSelection() (group string, ports [][2]string, err error) {
	switch sel := oc.SamplePorts; sel {
	case "":
		return "hosts", nil, nil
	case "hosts", "up", "all":
		return sel, nil, nil
	default:
		for _, name := range strings.Split(sel, ",") {
			a, b, ok := strings.Cut(strings.TrimSpace(name), "->")
			if !ok {
				return "", nil, fmt.Errorf("output.sample_ports: %q: want hosts, up, all or names like tor0->spine1", name)
			}
			ports = append(ports, [2]string{a, b})
		}
		return "", ports, nil
	}
}

// WorkloadConfig is the traffic. Kinds: incast, permutation, tornado, all_to_all,
// ring_allreduce, butterfly_allreduce, websearch, facebook_hadoop, connection_matrix, flows.
type WorkloadConfig struct {
	// Kind selects the traffic pattern.
	Kind string `yaml:"kind"`
	// Size is the message size (per flow; for all-reduce the whole buffer per host).
	Size Size `yaml:"size"`
	// Senders is the incast fan-in (0: every other host).
	Senders int `yaml:"senders"`
	// Receiver is the incast destination host.
	Receiver int `yaml:"receiver"`
	// Window is the number of concurrently active flows per host in all-to-all (0: 1).
	Window int `yaml:"window"`
	// Participants limits collectives to the first n hosts (0: all).
	Participants int `yaml:"participants"`
	// Interleave (all-reduce, L > 1) places rank r on host (r mod L)*(n/L) + r div L, so
	// consecutive ranks of the ring sit in different groups of n/L hosts (different leaves
	// when a leaf holds n/L): every ring hop crosses the spine. 0 or 1: rank r on host r.
	Interleave int `yaml:"interleave,omitempty"`
	// Jitter delays each flow's start by a uniform random time in [0, Jitter].
	Jitter config.Duration `yaml:"jitter"`
	// Load is the offered load per host for websearch and facebook_hadoop, as a fraction of the link rate.
	Load float64 `yaml:"load"`
	// Duration is how long websearch (facebook_hadoop) flows keep arriving.
	Duration config.Duration `yaml:"duration"`
	// MaxFlows caps the number of websearch flows (0: 100000).
	MaxFlows int `yaml:"max_flows"`
	// File is the connection matrix of kind connection_matrix (htsim's text format,
	// ParseConnectionMatrix); a relative path is read from the scenario file's directory.
	File string `yaml:"file"`
	// Flows lists the flows of kind flows (src, dst, start, size each).
	Flows []FlowSpec `yaml:"flows"`
	// CloseWhenDone closes a connection once its flows are done (bounds memory when a host
	// talks to many peers, as in all-to-all; default true for all_to_all).
	CloseWhenDone *bool `yaml:"close_when_done"`
}

// FailureConfig is one fault on the link between switches A and B (named as in the
// topology: tor3, agg1.0, core0.2, spine1, sw0), or between host A ("h12") and its ToR.
type FailureConfig struct {
	Kind string          `yaml:"kind"` // down, degrade, flaky
	A    string          `yaml:"a"`    // one end of the link
	B    string          `yaml:"b"`    // the other end
	At   config.Duration `yaml:"at"`   // when the fault starts
	// Until ends the fault (0: never).
	Until config.Duration `yaml:"until"`
	// Rate is the degraded link rate.
	Rate config.Rate `yaml:"rate"`
	// Gap and Burst are the mean times between and of loss bursts on a flaky link.
	Gap   config.Duration `yaml:"gap"`
	Burst config.Duration `yaml:"burst"`
}

// Check validates the failure's kind and parameters for a fabric of the given link rate;
// hostLink says whether the link has a host at one end (degrade is for switch-to-switch
// links only). The simulator and the testbed check failures the same way.
func (fc *FailureConfig) Check(linkRate config.Rate, hostLink bool) error {
	switch fc.Kind {
	case "down":
	case "degrade":
		if fc.Rate <= 0 || fc.Rate > linkRate {
			return fmt.Errorf("rate = %v: must be in (0, link_rate]", fc.Rate)
		}
		if hostLink {
			return fmt.Errorf("degrade is supported on switch-to-switch links only")
		}
	case "flaky":
		if fc.Gap <= 0 || fc.Burst <= 0 {
			return fmt.Errorf("flaky needs gap > 0 and burst > 0")
		}
	default:
		return fmt.Errorf("kind = %q: must be down, degrade or flaky", fc.Kind)
	}
	if fc.At < 0 || (fc.Until != 0 && fc.Until <= fc.At) {
		return fmt.Errorf("need 0 <= at (%v) < until (%v), or until 0", fc.At, fc.Until)
	}
	return nil
}

// Size is a byte count that reads with config.ParseSize's units: "2MiB", "4KiB", "4k"
// (binary), "1MB" (decimal), "1500" or "1e6"; at most 4 GiB.
type Size int64

// UnmarshalText reads a size with config.ParseSize.
func (s *Size) UnmarshalText(b []byte) error {
	n, err := config.ParseSize(string(b))
	if err != nil {
		return err
	}
	if n > math.MaxInt32*2 {
		return fmt.Errorf("%q: must be at most %d bytes", string(b), int64(math.MaxInt32*2))
	}
	*s = Size(n)
	return nil
}

// MarshalText writes the size in bytes.
func (s Size) MarshalText() ([]byte, error) { return []byte(strconv.FormatInt(int64(s), 10)), nil }

// LoadScenario reads a scenario file.
func LoadScenario(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ParseScenario(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.Dir = filepath.Dir(path)
	return s, nil
}

// ParseScenario decodes a scenario strictly (unknown fields are errors). Transport fields
// left out keep the daemon's defaults, except link_rate and base_rtt, which default to
// the fabric's link rate and longest-path base RTT.
func ParseScenario(b []byte) (*Scenario, error) {
	s := &Scenario{Seed: 1}
	s.Transport = transport.DefaultConfig()
	s.Transport.LinkRate, s.Transport.BaseRTT = 0, 0
	if err := config.DecodeYAML(b, s); err != nil {
		return nil, err
	}
	return s, nil
}
