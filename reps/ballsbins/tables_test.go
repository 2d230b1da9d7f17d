package ballsbins

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/test/results"
)

// The REPS paper's Sec. 5 and Apps. B-D figures as tables (docs/results/reps.md): each
// is deterministic (fixed seeds) and compared with the page by results.Check.
func TestTables(t *testing.T) {
	results.Check(t, "reps-bib-queues", queuesTable(t))
	results.Check(t, "reps-bib-converge", convergeTable(t))
	results.Check(t, "reps-bib-recycle", recycleTable(t))
	results.Check(t, "reps-bib-evs", evsTable())
}

const seeds = 3

// runs simulates c over seeds 1..seeds.
func runs(t *testing.T, c Config, steps int) []Run {
	t.Helper()
	var rs []Run
	for s := uint64(1); s <= seeds; s++ {
		c.Seed = s
		r, err := Simulate(c, steps)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

// spread is min / median / max of f over rs.
func spread(rs []Run, f func(Run) int) string {
	v := make([]int, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return fmt.Sprintf("%d / %d / %d", v[0], v[len(v)/2], v[len(v)-1])
}

// Figs. 13 and 14: the maximum load over time, OPS against recycled (tau 16, 8 colors per bin).
func queuesTable(t *testing.T) string {
	var b strings.Builder
	b.WriteString("| bins n | process | max load at step 100 | at 1,000 | at 10,000 | peak over 10,000 steps |\n|---|---|---|---|---|---|\n")
	for _, n := range []int{8, 32, 128} {
		for _, c := range []Config{{Bins: n}, {Bins: n, Colors: 8 * n, Threshold: 16}} {
			rs := runs(t, c, 10000)
			name := "OPS (uniform)"
			if c.Colors > 0 {
				name = "recycled, tau 16, 8n colors"
			}
			at := func(s int) func(Run) int { return func(r Run) int { return r.MaxLoad[s-1] } }
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s |\n", n, name, spread(rs, at(100)), spread(rs, at(1000)),
				spread(rs, at(10000)), spread(rs, func(r Run) int { return r.Peak }))
		}
	}
	return b.String()
}

// Thm. 5.1: convergence and the maximum load of the recycled process against n, tau and c.
func convergeTable(t *testing.T) string {
	var b strings.Builder
	b.WriteString("| bins n | tau | colors | seeds converged in 10,000 steps | step converged (each seed; - not) | peak max load | peak / ln n | balls at the end / (tau n) |\n|---|---|---|---|---|---|---|---|\n")
	for _, n := range []int{8, 16, 32, 64} {
		for _, tc := range [][2]int{{8, 4}, {16, 8}, {32, 16}} {
			rs := runs(t, Config{Bins: n, Colors: tc[1] * n, Threshold: tc[0]}, 10000)
			conv, steps, peak, fill := 0, []string{}, 0, []float64{}
			for _, r := range rs {
				peak = max(peak, r.Peak)
				fill = append(fill, float64(r.Balls)/float64(tc[0]*n))
				if r.Converged < 0 {
					steps = append(steps, "-")
					continue
				}
				conv++
				steps = append(steps, fmt.Sprint(r.Converged))
			}
			slices.Sort(fill)
			fmt.Fprintf(&b, "| %d | %d | %dn | %d/%d | %s | %d | %.1f | %.2f / %.2f / %.2f |\n", n, tc[0], tc[1], conv, len(rs),
				strings.Join(steps, ", "), peak, float64(peak)/math.Log(float64(n)), fill[0], fill[1], fill[2])
		}
	}
	return b.String()
}

// Fig. 17: recycling only every r-th ball (ACK coalescing r:1), n 16, tau 16, 8n colors.
func recycleTable(t *testing.T) string {
	var b strings.Builder
	b.WriteString("| recycling | peak max load | final max load | steps with max load > tau (of 10,000) |\n|---|---|---|---|\n")
	for _, r := range []int{1, 2, 4, 8, -2, -4, -8, 0} {
		c := Config{Bins: 16, Colors: 128, Threshold: 16, Recycle: r}
		name := fmt.Sprintf("%d:1, every ball fed back every %d steps", r, r)
		switch {
		case r == 1:
			name = "1:1"
		case r < 0:
			c.Recycle, c.TriggerOnly = -r, true
			name = fmt.Sprintf("%d:1, one ball in %d fed back", -r, -r)
		case r == 0:
			c, name = Config{Bins: 16, Threshold: 16}, "OPS"
		}
		rs := runs(t, c, 10000)
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, spread(rs, func(r Run) int { return r.Peak }),
			spread(rs, func(r Run) int { return r.MaxLoad[len(r.MaxLoad)-1] }), spread(rs, func(r Run) int { return r.Over }))
	}
	return b.String()
}

// App. B, Fig. 16: the load imbalance of flows x EVS balls on 8 ports, 200 trials, beside
// Raab and Steger's max load m/n + sqrt(2 (m/n) ln n) (for m >= n ln n).
func evsTable() string {
	var b strings.Builder
	b.WriteString("| flows | EVS | median imbalance | p99 | max | Raab-Steger |\n|---|---|---|---|---|---|\n")
	const bins, trials = 8, 200
	for _, f := range []int{1, 8, 32} {
		for _, e := range []int{8, 32, 256, 4096, 65536} {
			if f*e > 1<<17 {
				continue // the cost, and far into the near-zero range
			}
			s := ImbalanceSample(uint64(f*e), f, e, bins, trials)
			m := float64(f * e)
			rs := "-"
			if m >= bins*math.Log(bins) {
				rs = fmt.Sprintf("%.3f", math.Sqrt(2*bins*math.Log(bins)/m))
			}
			fmt.Fprintf(&b, "| %d | %d | %.3f | %.3f | %.3f | %s |\n", f, e, Quantile(s, 0.5), Quantile(s, 0.99), s[len(s)-1], rs)
		}
	}
	return b.String()
}

// The statements docs/results/reps.md makes beside the tables hold: OPS's maximum load
// grows with time and with n while the recycled one stays near tau; only the 8-bin rows
// converge; every r:1 variant stays below OPS, delayed feedback below trigger-only; the
// imbalance depends on flows x EVS only and falls as it grows.
func TestTableStatements(t *testing.T) {
	med := func(rs []Run, f func(Run) int) int {
		v := make([]int, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	last := func(r Run) int { return r.MaxLoad[len(r.MaxLoad)-1] }
	peak := func(r Run) int { return r.Peak }
	prev := 0
	for _, n := range []int{8, 32, 128} {
		ops := runs(t, Config{Bins: n}, 10000)
		rec := runs(t, Config{Bins: n, Colors: 8 * n, Threshold: 16}, 10000)
		if m := med(ops, last); m <= prev || m <= med(ops, func(r Run) int { return r.MaxLoad[999] }) {
			t.Errorf("n=%d: OPS max load %d at 10,000 steps does not grow with n and time", n, m)
		} else {
			prev = m
		}
		if p := med(rec, peak); p > 2*16 {
			t.Errorf("n=%d: recycled peak %d above 2 tau", n, p)
		}
	}
	for _, n := range []int{8, 16} {
		rs := runs(t, Config{Bins: n, Colors: 8 * n, Threshold: 16}, 10000)
		conv := 0
		for _, r := range rs {
			if r.Converged >= 0 {
				conv++
			}
		}
		if (n == 8) != (conv == len(rs)) || (n == 16 && conv != 0) {
			t.Errorf("n=%d, tau 16: %d of %d seeds converged", n, conv, len(rs))
		}
	}
	ops := med(runs(t, Config{Bins: 16}, 10000), peak)
	for _, r := range []int{2, 4, 8} {
		delayed := med(runs(t, Config{Bins: 16, Colors: 128, Threshold: 16, Recycle: r}, 10000), peak)
		trigger := med(runs(t, Config{Bins: 16, Colors: 128, Threshold: 16, Recycle: r, TriggerOnly: true}, 10000), peak)
		if !(delayed < trigger && trigger < ops) {
			t.Errorf("%d:1: peaks delayed %d, trigger-only %d, OPS %d: want increasing", r, delayed, trigger, ops)
		}
	}
	a, b := ImbalanceSample(1, 8, 32, 8, 400), ImbalanceSample(2, 32, 8, 8, 400)
	if d := math.Abs(Quantile(a, 0.5) - Quantile(b, 0.5)); d > 0.05 {
		t.Errorf("256 balls as 8x32 and 32x8: medians %.3f and %.3f", Quantile(a, 0.5), Quantile(b, 0.5))
	}
	if c := ImbalanceSample(3, 32, 256, 8, 400); Quantile(c, 0.5) >= Quantile(a, 0.5) {
		t.Error("more balls, no smaller imbalance")
	}
}
