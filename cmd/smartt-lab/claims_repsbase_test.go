package main

import (
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/test/results"
)

// mmm is the min / median / max in column col of the row whose first cell is row.
func (m mdTable) mmm(t *testing.T, col, row string) [3]float64 {
	t.Helper()
	return mmmCell(t, m.cell(t, col, row))
}

// tableWith returns the region's first table whose title starts with title and whose
// first column is head.
func tableWith(t *testing.T, regions []results.Region, name, title, head string) mdTable {
	t.Helper()
	for _, r := range regions {
		if r.Name != name {
			continue
		}
		for _, m := range tablesOf(r.Body) {
			if strings.HasPrefix(m.title, title) && len(m.head) > 0 && m.head[0] == head {
				return m
			}
		}
	}
	t.Fatalf("region %s has no table titled %q with column %q", name, title, head)
	return mdTable{}
}

var repsBaselines = []string{"MPRDMA", "BitMap", "Adaptive RoCE"}

// TestDocsClaimsREPSBaselines checks the sentences of docs/results/reps.md about the
// REPS paper's other baselines and Fig. 3 against the tables they describe.
func TestDocsClaimsREPSBaselines(t *testing.T) {
	regions := docsRegions(t)
	t.Run("fig2", func(t *testing.T) {
		// Permutation: REPS's median ahead of every baseline's; "REPS's slowest seed is
		// ahead of BitMap's and Adaptive RoCE's fastest, not of MPRDMA's"; "Tornado:
		// Adaptive RoCE 6 % ahead of REPS".
		m := tableWith(t, regions, "reps-base-fig2", "", "workload")
		reps := m.mmm(t, "REPS", "permutation, 8 MiB")
		for _, c := range repsBaselines {
			o := m.mmm(t, c, "permutation, 8 MiB")
			if o[1] <= reps[1] || (o[0] > reps[2]) != (c != "MPRDMA") {
				t.Errorf("permutation: %s %v against REPS %v", c, o, reps)
			}
		}
		if a, r := m.mmm(t, "Adaptive RoCE", "tornado, 8 MiB"), m.mmm(t, "REPS", "tornado, 8 MiB"); a[1] > r[1]/1.05 {
			t.Errorf("tornado: Adaptive RoCE %.3f not 5 %% ahead of REPS %.3f", a[1], r[1])
		}
	})
	t.Run("fig4", func(t *testing.T) {
		// Permutation and tornado: REPS, then MPRDMA, BitMap, Adaptive RoCE last; "MPRDMA,
		// 13 % behind", "BitMap ... 47 % behind".
		m := tableWith(t, regions, "reps-base-fig4", "", "workload")
		for _, row := range []string{"permutation, 8 MiB", "tornado, 8 MiB"} {
			prev := 0.0
			for _, c := range append([]string{"REPS"}, repsBaselines...) {
				if v := m.mmm(t, c, row)[1]; v <= prev {
					t.Errorf("%s: %s %.3f not behind the one before (%.3f)", row, c, v, prev)
				} else {
					prev = v
				}
			}
		}
		reps := m.mmm(t, "REPS", "permutation, 8 MiB")[1]
		if r := m.mmm(t, "MPRDMA", "permutation, 8 MiB")[1] / reps; r < 1.12 || r > 1.14 {
			t.Errorf("MPRDMA / REPS %.3f, the page says 13 %%", r)
		}
		if r := m.mmm(t, "BitMap", "permutation, 8 MiB")[1] / reps; r < 1.46 || r > 1.48 {
			t.Errorf("BitMap / REPS %.3f, the page says 47 %%", r)
		}
	})
	t.Run("fig15", func(t *testing.T) {
		// "the 99th-percentile RTT with forced freezing is within one histogram step
		// (about 1.6 %) of the normal run's"; the completions are reps-appa's.
		m := tableWith(t, regions, "reps-fig15", "", "forced freezing from")
		a := tableWith(t, regions, "reps-appa", "", "forced freezing from")
		off := m.mmm(t, "RTT p99", "off")[1]
		for _, at := range []string{"10us", "50us"} {
			if r := m.mmm(t, "RTT p99", at)[1] / off; r > 1.016 || r < 1/1.016 {
				t.Errorf("p99 RTT from %s / off = %.3f", at, r)
			}
		}
		for _, at := range []string{"off", "10us", "50us"} {
			if m.cell(t, "completion / ideal", at) != a.cell(t, "completion / ideal", at) {
				t.Errorf("%s: completion differs from reps-appa's", at)
			}
		}
	})
	t.Run("fig3", func(t *testing.T) {
		// OPS about 2x, REPS within 5 % of the perfect 1.067 and 6.7 % on the slow uplink,
		// Adaptive RoCE the fastest, BitMap between.
		m := tableWith(t, regions, "reps-fig3", "", "lb")
		ops, reps := m.mmm(t, "completion / ideal", "OPS"), m.mmm(t, "completion / ideal", "REPS")
		if ops[1] < 1.9 || reps[1] > 1.067*1.05 {
			t.Errorf("OPS %.3f (want about 2), REPS %.3f (want within 5 %% of 1.067)", ops[1], reps[1])
		}
		if s := m.mmm(t, "slow uplink's share of bytes %", "REPS"); s[1] > 7 {
			t.Errorf("REPS puts %.1f %% on the slow uplink, the page says 6.7", s[1])
		}
		ar := m.mmm(t, "completion / ideal", "Adaptive RoCE")
		for _, c := range []string{"OPS", "REPS", "MPRDMA", "BitMap"} {
			if o := m.mmm(t, "completion / ideal", c); o[1] <= ar[1] {
				t.Errorf("%s %.3f ahead of Adaptive RoCE %.3f", c, o[1], ar[1])
			}
		}
	})
	t.Run("fig7", func(t *testing.T) {
		// REPS ahead of each baseline on the permutation in every failure mode.
		for _, mode := range []string{"**Links down**", "**Flaky links**", "**Degraded links**"} {
			m := tableWith(t, regions, "reps-base-fig7", mode, "workload")
			reps := m.mmm(t, "REPS", "permutation, 8 MiB")
			for _, c := range repsBaselines {
				if o := m.mmm(t, c, "permutation, 8 MiB"); o[1] <= reps[1]*1.05 {
					t.Errorf("%s: %s %.3f not 5 %% behind REPS %.3f", mode, c, o[1], reps[1])
				}
			}
		}
	})
	t.Run("fig8", func(t *testing.T) {
		// REPS ahead of each baseline with 12.5 % and 25 % of the cables down.
		m := tableWith(t, regions, "reps-base-fig8", "", "cables down")
		for _, row := range []string{"12.5 %", "25 %"} {
			reps := m.mmm(t, "REPS", row)
			for _, c := range repsBaselines {
				if o := m.mmm(t, c, row); o[1] <= reps[1]*1.05 {
					t.Errorf("%s down: %s %.3f not 5 %% behind REPS %.3f", row, c, o[1], reps[1])
				}
			}
		}
	})
}
