package sim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
)

// outputs returns a digest of each file `smartt-lab sim run -out` writes from r (the JSON
// summary without its two wall-clock figures, the flows, queue and window CSVs).
func outputs(t *testing.T, r *Result) map[string]string {
	t.Helper()
	c := *r
	c.WallSeconds, c.HopsPerSec = 0, 0
	out := map[string]string{}
	for name, f := range map[string]func(*bytes.Buffer) error{
		"result.json": func(b *bytes.Buffer) error { return c.WriteJSON(b) },
		"flows.csv":   func(b *bytes.Buffer) error { return r.WriteFlowsCSV(b) },
		"queues.csv":  func(b *bytes.Buffer) error { return r.WriteSamplesCSV(b) },
		"windows.csv": func(b *bytes.Buffer) error { return r.WriteWindowsCSV(b) },
	} {
		var b bytes.Buffer
		if err := f(&b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		h := sha256.Sum256(b.Bytes())
		out[name] = hex.EncodeToString(h[:8])
	}
	out["hash"] = r.Hash()
	return out
}

// shardCase is a scenario the sharded run must reproduce.
type shardCase struct {
	name string
	file string           // scenario file under scenarios/ ("" : build)
	edit func(*Scenario)  // changes to the file's scenario
	mk   func() *Scenario // or a scenario built here
}

func shardCases(short bool) []shardCase {
	lb := func(name string) func(*Scenario) { return func(sc *Scenario) { sc.Transport.LB = name } }
	cs := []shardCase{
		{name: "permutation128-ecmp", file: "permutation_128.yaml", edit: lb("ecmp")},
		{name: "permutation128-reps", file: "permutation_128.yaml", edit: lb("reps")},
		{name: "incast128", file: "incast_128.yaml"},
		{name: "link-failure128", file: "link_failure_128.yaml"},
		{name: "hpcc-incast128-int", file: "hpcc_incast_128.yaml"},
		{name: "incast128-eqds", file: "incast_128.yaml", edit: func(sc *Scenario) { sc.Transport.CC = "eqds" }},
		{name: "permutation128-nscc-ops-spray", file: "permutation_128.yaml", edit: func(sc *Scenario) {
			sc.Transport.CC, sc.Transport.LB, sc.Topology.Routing = "nscc", "ops", "spray"
		}},
		{name: "alltoall128", file: "alltoall_128.yaml", edit: func(sc *Scenario) {
			sc.Workload.Participants, sc.Workload.Size = 48, 64<<10 // across both halves, 2,256 flows
		}},
		{name: "ai-permutation128-rts-ops", file: "ai_permutation_128.yaml", edit: func(sc *Scenario) {
			sc.Transport.LB, sc.Topology.Queue.ReturnToSender = "ops", true // headers turned around mid-fabric
		}},
		{name: "permutation128-ec-ops", file: "permutation_128.yaml", edit: func(sc *Scenario) {
			sc.Transport.LB, sc.Transport.Recovery.Mode = "ops", "ec"
		}},
		{name: "ring-allreduce128", file: "ring_allreduce_128.yaml"},
		{name: "butterfly-allreduce128", file: "butterfly_allreduce_128.yaml"},
		{name: "fattree3-websearch-windows", mk: func() *Scenario {
			sc := scenario(TopologyConfig{Kind: "fattree3", Hosts: 64, Radix: 8, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 300},
				WorkloadConfig{Kind: "websearch", Load: 0.5, Duration: 60_000, MaxFlows: 300})
			sc.Transport.CC = "smartt"
			sc.Transport.LB = "reps"
			sc.Output.SampleInterval = 2000
			sc.Output.SamplePorts = "up"
			sc.Output.SampleWindows = 4
			sc.Failures = []FailureConfig{{Kind: "down", A: "agg0.0", B: "core0.0", At: 5000}}
			sc.RoutingConvergence = 10_000
			return sc
		}},
	}
	if short {
		for i := range cs {
			e := cs[i].edit
			cs[i].edit = func(sc *Scenario) {
				if e != nil {
					e(sc)
				}
				sc.Workload.Size = 256 << 10
				if sc.Workload.Kind == "all_to_all" {
					sc.Workload.Size = 32 << 10
				}
			}
		}
	}
	return cs
}

func (c shardCase) scenario(t testing.TB) *Scenario {
	t.Helper()
	var sc *Scenario
	if c.mk != nil {
		sc = c.mk()
	} else {
		var err error
		sc, err = LoadScenario(filepath.Join("scenarios", c.file))
		if err != nil {
			t.Fatal(err)
		}
	}
	if c.edit != nil {
		c.edit(sc)
	}
	return sc
}

// A run on two shards writes the same outputs, byte for byte, as a run on one.
func TestShardsIdentical(t *testing.T) {
	for _, c := range shardCases(testing.Short()) {
		t.Run(c.name, func(t *testing.T) {
			var got [3]map[string]string
			var res [3]*Result
			for _, n := range []int{1, 2} {
				sc := c.scenario(t)
				sc.Sim.Shards = n
				s, err := New(sc)
				if err != nil {
					t.Fatal(err)
				}
				if s.sh == nil {
					t.Fatalf("shards %d: the scenario was not split", n)
				}
				res[n] = s.Run()
				got[n] = outputs(t, res[n])
			}
			r := res[1]
			t.Logf("%d/%d flows, %d hops, %d events, hash %s", r.Completed, r.Flows, r.Hops, r.Events, r.Hash()[:16])
			if r.Completed == 0 || r.Hops == 0 {
				t.Fatalf("nothing ran: %s", r.Summary())
			}
			for k, v := range got[1] {
				if got[2][k] != v {
					t.Errorf("%s differs: 1 shard %s, 2 shards %s", k, v, got[2][k])
				}
			}
		})
	}
}

// What splits and what does not: a leaf-spine and an oversubscribed 2-tier fabric split
// and reproduce on two shards; one switch does not split, runs as before on one shard
// and refuses two; sim.shards outside 1..2 is refused.
func TestShardsSplitOrNot(t *testing.T) {
	for _, tc := range []struct {
		name string
		topo TopologyConfig
	}{
		{"leafspine", TopologyConfig{Kind: "leafspine", Hosts: 32, Leaves: 4, Spines: 3, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 200}},
		{"fattree2-4to1", TopologyConfig{Kind: "fattree2", Hosts: 64, Radix: 16, Oversubscription: 4, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hash [3]string
			for _, n := range []int{1, 2} {
				sc := scenario(tc.topo, WorkloadConfig{Kind: "permutation", Size: 128 << 10})
				sc.Sim.Shards = n
				s, err := New(sc)
				if err != nil {
					t.Fatal(err)
				}
				if s.sh == nil {
					t.Fatal("not split")
				}
				r := s.Run()
				if r.Completed != r.Flows {
					t.Fatalf("%d shards: %d of %d flows", n, r.Completed, r.Flows)
				}
				hash[n] = r.Hash()
			}
			if hash[1] != hash[2] {
				t.Fatalf("hash %s on 1 shard, %s on 2", hash[1][:16], hash[2][:16])
			}
		})
	}
	single := TopologyConfig{Kind: "single", Hosts: 8, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 200}
	sc := scenario(single, WorkloadConfig{Kind: "permutation", Size: 64 << 10})
	s, err := New(sc)
	if err != nil {
		t.Fatal(err)
	}
	if s.sh != nil || s.ShardStats().Parts != 1 {
		t.Fatal("one switch was split")
	}
	if r := s.Run(); r.Completed != r.Flows {
		t.Fatalf("unsplit: %d of %d flows", r.Completed, r.Flows)
	}
	sc = scenario(single, WorkloadConfig{Kind: "permutation", Size: 64 << 10})
	sc.Sim.Shards = 2
	if _, err := New(sc); err == nil || !strings.Contains(err.Error(), "cannot be split") {
		t.Fatalf("two shards of one switch: %v", err)
	}
	sc.Sim.Shards = 3
	if _, err := New(sc); err == nil || !strings.Contains(err.Error(), "must be 1 or 2") {
		t.Fatalf("three shards: %v", err)
	}
}

// On one worker the parts share one pair of slot pools and part 1's packets into part 0
// skip the outbox (no copy at the barrier); the run still crosses between the halves
// and gives the two-worker result.
func TestShardsOneWorkerShares(t *testing.T) {
	topo := TopologyConfig{Kind: "leafspine", Hosts: 32, Leaves: 4, Spines: 3, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 200}
	var hash [3]string
	for _, n := range []int{1, 2} {
		sc := scenario(topo, WorkloadConfig{Kind: "permutation", Size: 128 << 10})
		sc.Sim.Shards = n
		s, err := New(sc)
		if err != nil {
			t.Fatal(err)
		}
		r := s.Run()
		if s.sh == nil || r.Completed != r.Flows {
			t.Fatalf("%d shards: split %v, %d of %d flows", n, s.sh != nil, r.Completed, r.Flows)
		}
		hash[n] = r.Hash()
		p0, p1 := s.sh.parts[0], s.sh.parts[1]
		shared := s.sh.pools[0].n > 0 && p0.dataHdrs.n == 0 && p1.dataHdrs.n == 0
		if n == 1 && (!shared || cap(p1.xout) != 0 || cap(p0.xout) == 0) {
			t.Fatalf("one worker: pools shared %v, outbox capacity part 0 %d, part 1 %d (want >0, 0)", shared, cap(p0.xout), cap(p1.xout))
		}
		if n == 2 && (shared || cap(p1.xout) == 0) {
			t.Fatalf("two workers: pools shared %v, part 1's outbox capacity %d", shared, cap(p1.xout))
		}
	}
	if hash[1] != hash[2] {
		t.Fatalf("hash %s on 1 shard, %s on 2", hash[1][:16], hash[2][:16])
	}
}
