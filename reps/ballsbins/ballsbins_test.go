package ballsbins

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// exactMaxLoad is E[max load] of balls thrown into bins, by enumerating all bins^balls
// outcomes (small sizes only).
func exactMaxLoad(balls, bins int) float64 {
	total, sum := 0, 0
	load := make([]int, bins)
	var rec func(k int)
	rec = func(k int) {
		if k == balls {
			total++
			sum += slices.Max(load)
			return
		}
		for b := range bins {
			load[b]++
			rec(k + 1)
			load[b]--
		}
	}
	rec(0)
	return float64(sum) / float64(total)
}

// The imbalance sampler agrees with the exact expectation at small sizes (within 5
// standard errors), is 0 for one bin and takes only the values max/mean - 1 allows.
func TestImbalanceClosedForm(t *testing.T) {
	for _, c := range [][2]int{{2, 2}, {3, 2}, {4, 3}, {6, 4}, {8, 8}} {
		balls, bins := c[0], c[1]
		want := exactMaxLoad(balls, bins)*float64(bins)/float64(balls) - 1
		s := ImbalanceSample(7, 1, balls, bins, 20000)
		mean, sq := 0.0, 0.0
		for _, v := range s {
			mean += v
			sq += v * v
		}
		mean /= float64(len(s))
		se := math.Sqrt((sq/float64(len(s)) - mean*mean) / float64(len(s)))
		if math.Abs(mean-want) > 5*se+1e-9 {
			t.Errorf("%d balls, %d bins: mean imbalance %.4f, exact %.4f (se %.4f)", balls, bins, mean, want, se)
		}
	}
	// Two balls, two bins: imbalance 0 or 1, each with probability 1/2.
	if got := exactMaxLoad(2, 2); got != 1.5 {
		t.Errorf("exact E[max] of 2 balls in 2 bins = %v, want 1.5", got)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	if v := Imbalance(rng, 1000, 1, make([]int, 1)); v != 0 {
		t.Errorf("one bin: imbalance %v", v)
	}
	if q := Quantile([]float64{1, 2, 3, 4}, 0.5); q != 2 {
		t.Errorf("median of 1..4 by nearest rank = %v, want 2", q)
	}
}

// OPS at full rate: one bin never holds more than one ball; after two steps the n bins
// hold n + (the bins the first batch left empty) balls, E = n + n (1 - 1/n)^n.
func TestOPSClosedForm(t *testing.T) {
	r, err := Simulate(Config{Bins: 1}, 1000)
	if err != nil || r.Peak != 1 {
		t.Fatalf("one bin: peak %d, %v", r.Peak, err)
	}
	for _, n := range []int{2, 4, 8} {
		const trials = 20000
		sum, sq := 0.0, 0.0
		for s := range trials {
			p, _ := New(Config{Bins: n, Seed: uint64(s)})
			p.Step()
			p.Step()
			v := float64(p.Balls())
			sum += v
			sq += v * v
		}
		mean := sum / trials
		se := math.Sqrt((sq/trials - mean*mean) / trials)
		want := float64(n) + float64(n)*math.Pow(1-1/float64(n), float64(n))
		if math.Abs(mean-want) > 5*se {
			t.Errorf("n=%d: E[balls after 2 steps] %.4f, closed form %.4f (se %.4f)", n, mean, want, se)
		}
	}
}

// The recycled process converges on 8 bins (tau 16, 8n
// colors): from then on every bin holds at most tau balls and the load pattern repeats
// every cycle of colors, while OPS's maximum load keeps growing.
func TestRecycledConverges(t *testing.T) {
	c := Config{Bins: 8, Colors: 64, Threshold: 16, Seed: 1}
	r, err := Simulate(c, 5000)
	if err != nil {
		t.Fatal(err)
	}
	if r.Converged < 0 {
		t.Fatal("did not converge in 5000 steps")
	}
	cycle := c.Colors / c.Bins
	for s := r.Converged; s < len(r.MaxLoad); s++ {
		if r.MaxLoad[s] > c.Threshold {
			t.Fatalf("step %d: max load %d above tau %d after convergence at %d", s+1, r.MaxLoad[s], c.Threshold, r.Converged)
		}
		if s >= r.Converged+cycle && r.MaxLoad[s] != r.MaxLoad[s-cycle] {
			t.Fatalf("step %d: max load %d, a cycle before %d: not periodic", s+1, r.MaxLoad[s], r.MaxLoad[s-cycle])
		}
	}
	o, _ := Simulate(Config{Bins: 8, Seed: 1}, 5000)
	if o.MaxLoad[4999] <= 2*r.Peak {
		t.Errorf("OPS max load at 5000 steps %d, not above twice the recycled peak %d", o.MaxLoad[4999], r.Peak)
	}
	if o.Converged != -1 {
		t.Error("OPS reported convergence")
	}
}

// The same seed gives the same run, another seed another; Recycle 1 with and without
// TriggerOnly is the same process; trigger-only feedback at 4:1 never settles (three
// colors in four never learn a bin).
func TestRecycledDeterminismAndFeedback(t *testing.T) {
	c := Config{Bins: 16, Colors: 128, Threshold: 16, Seed: 3}
	a, _ := Simulate(c, 2000)
	b, _ := Simulate(c, 2000)
	if !slices.Equal(a.MaxLoad, b.MaxLoad) {
		t.Fatal("same seed, different runs")
	}
	c.TriggerOnly = true
	d, _ := Simulate(c, 2000)
	if !slices.Equal(a.MaxLoad, d.MaxLoad) {
		t.Fatal("TriggerOnly at 1:1 changed the process")
	}
	c.Seed, c.TriggerOnly = 4, false
	if e, _ := Simulate(c, 2000); slices.Equal(a.MaxLoad, e.MaxLoad) {
		t.Fatal("another seed, the same run")
	}
	p, _ := New(Config{Bins: 8, Colors: 64, Threshold: 1000, Recycle: 4, TriggerOnly: true, Seed: 1})
	for range 3000 {
		p.Step()
	}
	learned := 0
	for _, m := range p.mem {
		if m >= 0 {
			learned++
		}
	}
	if learned != 16 || p.Settled() {
		t.Errorf("trigger-only 4:1: %d of 64 colors remember a bin (want the 16 triggers), settled %v", learned, p.Settled())
	}
}

// Invalid configurations are refused.
func TestConfigLimits(t *testing.T) {
	for _, c := range []Config{{Bins: 0}, {Bins: 4, Colors: 6, Threshold: 1}, {Bins: 4, Colors: -4}, {Bins: 4, Colors: 8}} {
		if _, err := New(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if _, err := New(Config{Bins: 4, Colors: 8, Threshold: 1}); err != nil {
		t.Errorf("the smallest valid recycled process refused: %v", err)
	}
}
