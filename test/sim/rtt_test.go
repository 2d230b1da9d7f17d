package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Every value falls in the bucket whose low edge is at most it and within 1/64 of it;
// the buckets' low edges rise strictly, so percentiles are monotone.
func TestRTTBuckets(t *testing.T) {
	prev := int64(-1)
	for i := 0; i < rttBucket(1<<63-1); i++ {
		lo := rttLow(i)
		if lo <= prev {
			t.Fatalf("bucket %d starts at %d, not above bucket %d's %d", i, lo, i-1, prev)
		}
		if rttBucket(uint64(lo)) != i {
			t.Fatalf("bucket %d's low edge %d falls in bucket %d", i, lo, rttBucket(uint64(lo)))
		}
		prev = lo
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		v := rng.Int64N(1 << uint(rng.IntN(62)+1))
		lo := rttLow(rttBucket(uint64(v)))
		if lo > v || float64(v-lo) > float64(v)/rttSub {
			t.Fatalf("%d in a bucket starting at %d", v, lo)
		}
	}
}

// The summary's percentiles are within the histogram's resolution of the exact ones
// (nearest rank), the max is exact, a negative sample counts as 0, and merging two
// histograms gives the histogram of all their samples.
func TestRTTQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var a, b, all rttHist
	var xs []int64
	for i := range 20000 {
		v := 5000 + rng.Int64N(1000)
		if i%100 == 0 {
			v = 200000 + rng.Int64N(50000) // a tail of 1 %
		}
		xs = append(xs, v)
		if i%2 == 0 {
			a.add(v)
		} else {
			b.add(v)
		}
		all.add(v)
	}
	a.merge(&b)
	if !slices.Equal(a.counts, all.counts) || a.n != all.n || a.max != all.max {
		t.Fatal("merged halves differ from one histogram of every sample")
	}
	slices.Sort(xs)
	exact := func(q float64) int64 { return xs[int(q*float64(len(xs))+0.999999)-1] }
	s := all.summary()
	for _, c := range []struct {
		name      string
		got, want int64
	}{{"p50", s.P50, exact(0.5)}, {"p90", s.P90, exact(0.9)}, {"p99", s.P99, exact(0.99)}} {
		if c.got > c.want || float64(c.want-c.got) > float64(c.want)/rttSub {
			t.Errorf("%s %d, exact %d", c.name, c.got, c.want)
		}
	}
	if s.Max != xs[len(xs)-1] || s.Samples != uint64(len(xs)) || s.P99 < 5000 || s.P99 > 6000 || s.Max < 200000 {
		t.Errorf("summary %+v (max %d)", s, xs[len(xs)-1])
	}
	var z rttHist
	if z.summary() != nil {
		t.Fatal("an empty histogram has a summary")
	}
	z.add(-5)
	if s := z.summary(); s.P50 != 0 || s.Max != 0 || s.Samples != 1 {
		t.Fatalf("a negative sample: %+v", s)
	}
}

// output.rtt reports the senders' RTT distribution without changing the run: an 8:1
// incast under SMaRTT gives the same result with and without it (its hash, the RTT
// summary left out), also when every connection is told its path's switch count
// (per_flow_base_rtt: the tap passes SetHops on); one sample per ACK, in order, and a
// queue that stretches the 99th percentile past the median.
func TestRTTOutput(t *testing.T) {
	mk := func(on, perFlow bool) *Scenario {
		sc := scenario(TopologyConfig{Kind: "fattree2", Hosts: 32, Radix: 8, LinkRate: 100e9, LinkLatency: 1000, SwitchLatency: 500},
			WorkloadConfig{Kind: "incast", Senders: 8, Receiver: 0, Size: 1 << 20})
		sc.Transport.CC = "smartt"
		sc.PerFlowBaseRTT = perFlow
		sc.Output.RTT = on
		return sc
	}
	for _, perFlow := range []bool{false, true} {
		off, on := run(t, mk(false, perFlow)), run(t, mk(true, perFlow))
		if off.RTT != nil {
			t.Fatal("an RTT summary without output.rtt")
		}
		s := on.RTT
		if s == nil || s.Samples < 8*(1<<20)/4096/8 {
			t.Fatalf("RTT summary %+v: want one sample per ACK", s)
		}
		if s.P50 <= 0 || s.P90 < s.P50 || s.P99 < s.P90 || s.Max < s.P99 || float64(s.P99) < 1.2*float64(s.P50) {
			t.Errorf("RTT summary %+v: percentiles out of order or no queueing in the tail", s)
		}
		on.RTT = nil
		if on.Hash() != off.Hash() {
			t.Fatalf("per_flow_base_rtt %v: output.rtt changed the run", perFlow)
		}
	}
}
