package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/transport"
)

// scenario returns a scenario on top of the daemon's transport defaults.
func scenario(topo TopologyConfig, wl WorkloadConfig) *Scenario {
	sc := &Scenario{Name: "test", Seed: 1, Topology: topo, Workload: wl, Transport: transport.DefaultConfig()}
	sc.Transport.LinkRate, sc.Transport.BaseRTT = 0, 0
	// The fabric's closed forms are checked with a known, constant window; the
	// scenario files and the CLI run the default controller.
	sc.Transport.CC = "fixed"
	return sc
}

func run(t *testing.T, sc *Scenario) *Result {
	t.Helper()
	s, err := New(sc)
	if err != nil {
		t.Fatal(err)
	}
	r := s.Run()
	t.Log(r.Summary())
	return r
}

func within(got, want int64, frac float64) bool {
	return math.Abs(float64(got)-float64(want)) <= frac*float64(want)
}

// One flow on an idle path finishes in size/rate plus the base RTT. The wire carries a
// 64-byte header per MTU of payload, so "size" is the bytes on the wire.
func TestSingleFlowClosedForm(t *testing.T) {
	for _, tc := range []struct {
		name string
		topo TopologyConfig
	}{
		{"single", TopologyConfig{Kind: "single", Hosts: 2, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 500}},
		{"fattree3", TopologyConfig{Kind: "fattree3", Hosts: 16, Radix: 4, LinkRate: 400e9, LinkLatency: 500, SwitchLatency: 500}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const size = 1 << 20
			sc := scenario(tc.topo, WorkloadConfig{Kind: "incast", Senders: 1, Receiver: 0, Size: size})
			sc.Transport.InitialWindow = 4 << 20 // never window-limited
			if tc.name == "fattree3" {
				sc.Workload.Receiver = 15 // across the core: 6 links
			}
			s, err := New(sc)
			if err != nil {
				t.Fatal(err)
			}
			src := int(s.flows[0].src)
			links := s.tp.linksBetween(int32(src), int32(sc.Workload.Receiver))
			if tc.name == "fattree3" && links != 6 {
				t.Fatalf("%d links between %d and 15", links, src)
			}
			rate := float64(tc.topo.LinkRate)
			wireBytes := float64(size + (size/4096)*64)
			want := int64(wireBytes*8/rate*1e9) + s.baseRTT(links, 4096) - s.ser(4096+64, int64(rate))
			r := s.Run()
			t.Log(r.Summary())
			if r.Completed != 1 {
				t.Fatalf("flow not completed")
			}
			if !within(r.PerFlow[0].FCT, want, 0.01) {
				t.Fatalf("fct %d ns, closed form %d ns", r.PerFlow[0].FCT, want)
			}
			if r.Ratio < 0.99 || r.Ratio > 1.01 {
				t.Fatalf("completion / ideal = %.4f", r.Ratio)
			}
		})
	}
}

// Emulated decision latency delays every ACK by exactly that much: a single flow, whose
// completion waits for its last ACK, finishes that much later (and the fixed window, a
// BDP larger than needed, keeps the link busy meanwhile).
func TestDecisionLatency(t *testing.T) {
	mk := func(lat int64, prof string) *Result {
		sc := scenario(TopologyConfig{Kind: "single", Hosts: 2, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 500},
			WorkloadConfig{Kind: "incast", Senders: 1, Receiver: 0, Size: 1 << 20})
		sc.Transport.InitialWindow = 4 << 20
		sc.DecisionLatency = configDuration(lat)
		sc.HardwareProfile = prof
		return run(t, sc)
	}
	base, slow, prof := mk(0, ""), mk(5_000, ""), mk(0, "cx6dx")
	if d := slow.PerFlow[0].FCT - base.PerFlow[0].FCT; d != 5_000 {
		t.Fatalf("5 us decision latency added %d ns to the FCT", d)
	}
	if d := prof.PerFlow[0].FCT - base.PerFlow[0].FCT; d != 2_000 {
		t.Fatalf("cx6dx profile (2 us decisions) added %d ns", d)
	}
	if slow.Hops != base.Hops {
		t.Fatalf("decision delay counted as hops: %d vs %d", slow.Hops, base.Hops)
	}
}

// N:1 incast with trimming and an ideal (spraying) balancer finishes within 10 % of
// N*size/rate: the receiver's link stays busy, trimmed packets are resent at once.
func TestIncastClosedForm(t *testing.T) {
	for _, tc := range []struct {
		name string
		topo TopologyConfig
		n    int
	}{
		{"single", TopologyConfig{Kind: "single", Hosts: 17, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 500}, 16},
		{"fattree2", TopologyConfig{Kind: "fattree2", Hosts: 32, Radix: 8, LinkRate: 400e9, LinkLatency: 500, SwitchLatency: 500}, 24},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const size = 1 << 20
			sc := scenario(tc.topo, WorkloadConfig{Kind: "incast", Senders: tc.n, Receiver: 0, Size: size})
			sc.Transport.LB = "ops" // per-packet spraying: an ideal balancer for an incast
			// A fixed window (the helper pins cc fixed): each sender gets the fair share of
			// 1.5 x (BDP + queue), so the queue overflows (trims) without collapse.
			s0, err := New(sc)
			if err != nil {
				t.Fatal(err)
			}
			bdp := int(float64(tc.topo.LinkRate) / 8 * float64(s0.baseRTT(s0.tp.maxLinks, 4096)) / 1e9)
			sc.Transport.InitialWindow = max(4096, 3*(2*bdp)/2/tc.n)
			sc.Transport.MaxRetransmits = 255 // without CC a packet may be trimmed many times
			r := run(t, sc)
			if r.Completed != tc.n || r.Failed != 0 {
				t.Fatalf("%d of %d flows completed", r.Completed, tc.n)
			}
			want := int64(float64(tc.n*size) * 8 / float64(tc.topo.LinkRate) * 1e9)
			if !within(r.Completion, want, 0.10) {
				t.Fatalf("incast completion %d ns, N*size/rate = %d ns", r.Completion, want)
			}
			if r.Trims == 0 || r.RetxNack == 0 {
				t.Fatalf("no trimming in a %d:1 incast with 1-BDP queues (trims %d)", tc.n, r.Trims)
			}
			if r.Drops != 0 {
				t.Fatalf("%d drops with trimming", r.Drops)
			}
		})
	}
}

// A permutation on a non-blocking fat tree: ECMP's hash collisions make the slowest flow
// far slower than ideal, while spraying (OPS) and REPS stay close to ideal.
func TestPermutationECMPvsSpraying(t *testing.T) {
	topo := TopologyConfig{Kind: "fattree2", Hosts: 64, Radix: 16, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 500}
	res := map[string]*Result{}
	for _, lb := range []string{"ecmp", "ops", "reps"} {
		res[lb] = permutation64(t, topo, lb)
	}
	if s := res["ecmp"].FCT.MaxSlowdown; s < 1.5 {
		t.Fatalf("ECMP max slowdown %.2f: expected hash collisions to at least 1.5x", s)
	}
	for _, lb := range []string{"ops", "reps"} {
		if s := res[lb].FCT.MaxSlowdown; s > 1.25 {
			t.Fatalf("%s max slowdown %.2f: expected near ideal", lb, s)
		}
		if res["ecmp"].Ratio < 1.5*res[lb].Ratio {
			t.Fatalf("ECMP completion ratio %.2f not well above %s's %.2f", res["ecmp"].Ratio, lb, res[lb].Ratio)
		}
	}
}

// The same scenario and seed give the same output, bit for bit; another seed does not.
func TestDeterminism(t *testing.T) {
	mk := func(seed uint64) *Scenario {
		sc := scenario(TopologyConfig{Kind: "fattree2", Hosts: 32, Radix: 8, Oversubscription: 2, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 500},
			WorkloadConfig{Kind: "permutation", Size: 256 << 10, Jitter: 2000})
		sc.Seed = seed
		sc.Transport.MaxRetransmits = 255
		sc.Output = OutputConfig{SampleInterval: 1000, SamplePorts: "up"}
		sc.Failures = []FailureConfig{{Kind: "flaky", A: "tor0", B: "spine0", At: 5000, Gap: 20000, Burst: 2000}}
		return sc
	}
	a, b, c := run(t, mk(7)), run(t, mk(7)), run(t, mk(8))
	if a.Hash() != b.Hash() {
		t.Fatalf("same seed, different outputs: %s vs %s", a.Hash(), b.Hash())
	}
	if a.Hash() == c.Hash() {
		t.Fatal("different seeds, same output hash")
	}
	if a.Completed != 32 || len(a.Samples) == 0 || len(a.Samples[0].Times) == 0 {
		t.Fatalf("completed %d, %d sampled ports", a.Completed, len(a.Samples))
	}
}

// The same closed form with the daemon's default controller (SMaRTT) and no window
// tuning: 32:1 at 800 Gbit/s on the 128-host fat tree finishes within 10 % of
// N x size / rate.
func TestIncastSMaRTT(t *testing.T) {
	const n, size = 32, 1 << 20
	sc := scenario(TopologyConfig{Kind: "fattree2", Hosts: 128, Radix: 16, LinkRate: 800e9, LinkLatency: 600, SwitchLatency: 400},
		WorkloadConfig{Kind: "incast", Senders: n, Receiver: 0, Size: size})
	sc.Transport.CC = transport.DefaultConfig().CC
	sc.Transport.LB = "ops"
	r := run(t, sc)
	if r.CC != "smartt" {
		t.Fatalf("the default CC is %q, not SMaRTT", r.CC)
	}
	rate := 800e9
	want := int64(float64(n*size) * 8 / rate * 1e9)
	if r.Completed != n || !within(r.Completion, want, 0.10) {
		t.Fatalf("%d/%d flows, completion %d ns, N*size/rate = %d ns", r.Completed, n, r.Completion, want)
	}
}

// TestCCNeedsECN: a controller whose registration declares it needs ECN is refused on a
// fabric with marking off.
func TestCCNeedsECN(t *testing.T) {
	sc := scenario(TopologyConfig{Kind: "single", Hosts: 2, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 500},
		WorkloadConfig{Kind: "incast", Senders: 1, Receiver: 0, Size: 1 << 20})
	sc.Transport.CC = "dctcp"
	sc.Topology.Queue.NoECN = true
	if _, err := New(sc); err == nil || !strings.Contains(err.Error(), "needs ECN") {
		t.Fatalf("err = %v", err)
	}
	sc.Transport.CC = "swift" // delay-based: runs without ECN
	if _, err := New(sc); err != nil {
		t.Fatal(err)
	}
}

// permutation64 runs a permutation of 1 MiB flows over topo's 64 hosts under balancer lb
// and fails t unless all 64 complete. With a fixed window (no congestion control),
// colliding flows keep trimming each other's retransmissions: it allows the engine's
// maximum retransmissions.
func permutation64(t *testing.T, topo TopologyConfig, lb string) *Result {
	t.Helper()
	sc := scenario(topo, WorkloadConfig{Kind: "permutation", Size: 1 << 20})
	sc.Transport.MaxRetransmits = 255
	sc.Transport.LB = lb
	r := run(t, sc)
	if r.Completed != 64 {
		t.Fatalf("%s %s: %d of 64 flows completed", topo.Routing, lb, r.Completed)
	}
	return r
}
