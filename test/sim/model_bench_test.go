package sim

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/smartt-transport/smartt/ackpath"
	"github.com/smartt-transport/smartt/cc/smartt"
	"github.com/smartt-transport/smartt/reps"
	"github.com/smartt-transport/smartt/transport"
)

// ackPolicies are the receiver ACK policies BenchmarkAckPolicy compares.
var ackPolicies = []struct {
	name string
	set  func(a *ackpath.Config)
}{
	{"default", func(a *ackpath.Config) {}}, // an ACK per packet, at once when out of order
	{"htsim_on_reorder", func(a *ackpath.Config) { // htsim's counts, out-of-order arrivals still ACKed
		a.Every, a.EveryBytes, a.OnCE, a.CleanEVs = 64, 16384, true, true
	}},
	{"htsim_fill", func(a *ackpath.Config) { // no ACK for reordering, but one for a filled hole
		a.Every, a.EveryBytes, a.OnCE, a.CleanEVs, a.OnReorder = 64, 16384, true, true, false
	}},
	{"htsim", func(a *ackpath.Config) { // htsim's policy: per 16 KiB, on CE, when forced
		a.Every, a.EveryBytes, a.OnCE, a.CleanEVs, a.OnReorder, a.DeferFill = 64, 16384, true, true, false, true
	}},
}

// BenchmarkAckPolicy runs a scenario with REPS under each ACK policy and seed and reports
// control packets per data packet, completion / ideal, the p99 slowdown, trims and the
// share of unmarked data packets whose EV REPS was handed back (clean_evs). The 128-host
// runs take about a second each; the 1,024-host ones (reps_1024_permutation) several:
//
//	go test -run '^$' -bench 'AckPolicy/permutation_128' -benchtime 1x ./test/sim
//	go test -run '^$' -bench 'AckPolicy/reps_1024' -benchtime 1x ./test/sim
func BenchmarkAckPolicy(b *testing.B) {
	for _, file := range []string{"permutation_128", "reps_1024_permutation"} {
		for _, pol := range ackPolicies {
			for seed := uint64(1); seed <= 3; seed++ {
				b.Run(fmt.Sprintf("%s/%s/seed=%d", file, pol.name, seed), func(b *testing.B) {
					for b.Loop() {
						sc := smarttREPS(b, file, seed)
						pol.set(&sc.Transport.Ack)
						sc.Transport.REPS.CleanEVs = sc.Transport.Ack.CleanEVs
						clean := 0
						sc.NewTransport = func(host int, cfg *transport.Config, hk *transport.Hooks) {
							env := reps.Env{EVS: cfg.EVS, BDPPackets: int(cfg.Network().BDP()/int64(cfg.MTU)) + 1, BaseRTT: int64(cfg.BaseRTT), Trimming: cfg.Trimming}
							rc := cfg.REPS
							hk.NewBalancer = func(rng *rand.Rand) reps.Balancer { return &evCounter{reps.NewREPS(rc, env, rng), &clean} }
						}
						sc.LBName = "reps"
						s, r := runComplete(b, sc)
						var unmarked uint64
						for i := range s.hosts {
							st := s.hosts[i].ep.Stats()
							unmarked += st.DataRecv - st.CERecv
						}
						b.ReportMetric(float64(r.PacketsSent-r.DataSent)/float64(r.DataSent), "ctl/data")
						b.ReportMetric(r.Ratio, "completion/ideal")
						b.ReportMetric(r.FCT.P99Slowdown, "p99_slowdown")
						b.ReportMetric(float64(r.Trims), "trims")
						b.ReportMetric(float64(clean)/float64(unmarked), "clean_evs")
						b.ReportMetric(float64(r.Hops)/1e6, "Mhops")
						b.ReportMetric(r.WallSeconds, "wall_s")
					}
				})
			}
		}
	}
}

// htsimOptions are the htsim model options (docs/sim.md), by name.
var htsimOptions = []struct {
	name string
	set  func(sc *Scenario)
}{
	{"ack", func(sc *Scenario) { ackPolicies[3].set(&sc.Transport.Ack); sc.Transport.REPS.CleanEVs = true }},
	{"ack64", func(sc *Scenario) { sc.ControlWireBytes = 64 }},
	{"evict", func(sc *Scenario) { sc.Topology.Queue.Evict = 0.5 }},
	{"fixed_rto", func(sc *Scenario) { sc.Transport.FixedRTO = sc.Transport.MinRTO }},
	{"base_rtt", func(sc *Scenario) { sc.PerFlowBaseRTT = true; sc.Transport.SMaRTT.LowerBaseRTT = true }},
	{"smartt", func(sc *Scenario) { sc.Transport.SMaRTT = smartt.REPSArtifactConfig() }},
}

// modelOptions are none, each htsim option alone, and all of them.
func modelOptions() []struct {
	name string
	set  func(sc *Scenario)
} {
	opts := append([]struct {
		name string
		set  func(sc *Scenario)
	}{{"none", func(*Scenario) {}}}, htsimOptions...)
	return append(opts, struct {
		name string
		set  func(sc *Scenario)
	}{"all", func(sc *Scenario) {
		for _, o := range htsimOptions {
			o.set(sc)
		}
	}})
}

// BenchmarkModelOptions runs the 128-host permutation and 32:1 incast with SMaRTT and
// REPS under each htsim model option alone and all together, three seeds each (about a
// second per run):
//
//	go test -run '^$' -bench ModelOptions -benchtime 1x ./test/sim
func BenchmarkModelOptions(b *testing.B) {
	for _, file := range []string{"permutation_128", "incast_128"} {
		for _, opt := range modelOptions() {
			for seed := uint64(1); seed <= 3; seed++ {
				b.Run(fmt.Sprintf("%s/%s/seed=%d", file, opt.name, seed), func(b *testing.B) {
					for b.Loop() {
						sc := smarttREPS(b, file, seed)
						opt.set(sc)
						_, r := runComplete(b, sc)
						b.ReportMetric(r.Ratio, "completion/ideal")
						b.ReportMetric(r.FCT.P99Slowdown, "p99_slowdown")
						b.ReportMetric(float64(r.Trims), "trims")
						b.ReportMetric(float64(r.RetxTimeout), "retx_timeout")
						b.ReportMetric(float64(r.PacketsSent-r.DataSent)/float64(r.DataSent), "ctl/data")
						b.ReportMetric(float64(r.Hops)/1e6, "Mhops")
					}
				})
			}
		}
	}
}

// smarttREPS loads scenarios/file.yaml with seed, under SMaRTT and REPS.
func smarttREPS(b *testing.B, file string, seed uint64) *Scenario {
	sc, err := LoadScenario("scenarios/" + file + ".yaml")
	if err != nil {
		b.Fatal(err)
	}
	sc.Seed = seed
	sc.Transport.CC, sc.Transport.LB = "smartt", "reps"
	return sc
}

// runComplete runs sc and fails b unless every flow completed; it returns the simulation
// and its result.
func runComplete(b *testing.B, sc *Scenario) (*Sim, *Result) {
	s, err := New(sc)
	if err != nil {
		b.Fatal(err)
	}
	r := s.Run()
	if r.Completed != r.Flows {
		b.Fatalf("%d of %d flows completed", r.Completed, r.Flows)
	}
	return s, r
}
