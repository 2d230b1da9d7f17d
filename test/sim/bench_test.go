package sim

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkEventQueue measures the event core: each op pops the earliest of ~64k pending
// events and schedules a new one a random time ahead (the steady state of a busy fabric).
func BenchmarkEventQueue(b *testing.B) {
	var q eventQueue
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 1 << 16 {
		q.push(rng.Int64N(10_000), mkVal(evUser, int32(i), 0))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		e := q.pop()
		q.push(e.at()+1+rng.Int64N(10_000), e.val)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// permutation128 is the benchmark scenario: 128 hosts on a 2-tier fat tree (radix 16,
// 1:1), 800 Gbit/s, 1 BDP queues, a permutation of size-byte messages with ECMP.
func permutation128(size int64) *Scenario {
	sc := scenario(TopologyConfig{Kind: "fattree2", Hosts: 128, Radix: 16, LinkRate: 800e9, LinkLatency: 600, SwitchLatency: 400},
		WorkloadConfig{Kind: "permutation", Size: Size(size)})
	sc.Transport.InitialWindow = 768 << 10
	sc.Transport.MaxRetransmits = 255
	sc.Transport.MinRTO, sc.Transport.InitialRTO = 50_000, 50_000
	sc.Transport.PSNWindow = 1024
	return sc
}

// BenchmarkPermutation128 runs the whole 128-host permutation; hops/s is simulated
// packet-hops per wall second, events/s likewise.
func BenchmarkPermutation128(b *testing.B) {
	b.ReportAllocs()
	var hops, events uint64
	for b.Loop() {
		s, err := New(permutation128(2 << 20))
		if err != nil {
			b.Fatal(err)
		}
		r := s.Run()
		if r.Completed != 128 {
			b.Fatalf("%d of 128 flows completed", r.Completed)
		}
		hops += r.Hops
		events += r.Events
	}
	b.ReportMetric(float64(hops)/b.Elapsed().Seconds(), "hops/s")
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

// TestSteadyStateAllocations checks that forwarding allocates nothing per packet once
// pools have grown: a second, larger batch of messages on the same connections must not
// allocate in proportion to its packets.
func TestSteadyStateAllocations(t *testing.T) {
	sc := permutation128(256 << 10)
	sc.Topology.Hosts = 32
	sc.Topology.Radix = 8
	s, err := New(sc)
	if err != nil {
		t.Fatal(err)
	}
	s.Run()
	// Same flows again on the warmed-up fabric and engines.
	for i := range s.flows {
		f := &s.flows[i]
		f.start, f.rx, f.tx, f.at = -1, -1, -1, s.now
	}
	s.flowsDone = 0
	hops0 := s.hops
	allocs := testing.AllocsPerRun(1, func() { s.Run() })
	pkts := float64(s.hops - hops0)
	if pkts < 10000 {
		t.Fatalf("only %v hops in the second run", pkts)
	}
	if per := allocs / pkts; per > 0.01 {
		t.Fatalf("%.0f allocations for %.0f packet-hops (%.3f per hop)", allocs, pkts, per)
	}
	t.Logf("%.0f allocations for %.0f packet-hops", allocs, pkts)
}

// BenchmarkPermutation1024 is the scale run (the SMaRTT paper's 1,024-host 3-tier fat
// tree, 800 Gbit/s, permutation of 2 MiB messages): run it explicitly with
// -bench Permutation1024 -benchtime 1x; it takes a few seconds.
func BenchmarkPermutation1024(b *testing.B) {
	var hops uint64
	for b.Loop() {
		sc, err := LoadScenario("scenarios/smartt_1024_permutation.yaml")
		if err != nil {
			b.Fatal(err)
		}
		s, err := New(sc)
		if err != nil {
			b.Fatal(err)
		}
		r := s.Run()
		if r.Completed != 1024 {
			b.Fatalf("%d of 1024 flows completed", r.Completed)
		}
		hops += r.Hops
	}
	b.ReportMetric(float64(hops)/b.Elapsed().Seconds(), "hops/s")
}
