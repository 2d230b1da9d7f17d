package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/test/results"
)

// mmmCell parses a "min / median / max" cell (numbers may carry a unit: "6 %").
func mmmCell(t *testing.T, cell string) [3]float64 {
	t.Helper()
	parts := strings.Split(cell, "/")
	if len(parts) != 3 {
		t.Fatalf("cell %q is not min / median / max", cell)
	}
	var v [3]float64
	for i, p := range parts {
		f, err := strconv.ParseFloat(strings.Fields(p)[0], 64)
		if err != nil {
			t.Fatalf("cell %q: %v", cell, err)
		}
		v[i] = f
	}
	return v
}

// cell returns the cell of column col in the row whose first cell is key.
func (m mdTable) cell(t *testing.T, col, key string) string {
	t.Helper()
	for i, h := range m.head {
		if h != col {
			continue
		}
		for _, r := range m.rows {
			if r[0] == key && len(r) > i {
				return r[i]
			}
		}
	}
	t.Fatalf("%q: no cell %s of row %s", m.title, col, key)
	return ""
}

// The sentences of docs/results/smartt.md beside the scripts/smartt-figs tables (Figs. 3,
// 11c, 12) hold for those tables.
func TestDocsClaimsSMaRTTFigs(t *testing.T) {
	regions := docsRegions(t)
	t.Run("fig3", func(t *testing.T) { smarttFig3Claims(t, regions) })
	t.Run("swift-lb", func(t *testing.T) { smarttSwiftLBClaims(t, regions) })
	t.Run("fig11c", func(t *testing.T) { smarttFig11cClaims(t, regions) })
	t.Run("fig10-cc", func(t *testing.T) { smarttFig10Claims(t, regions) })
}

// smarttFig10Claims: "SMaRTT is the fastest controller in 6 of the 12 cells: every incast
// of 64 senders, 32 senders at 512 KiB and 2 MiB, and 16 senders at 2 MiB"; "at 8:1 with
// 512 KiB and 16:1 with 256 and 512 KiB SMaRTT takes 1.28-1.50 of ideal where BBR and
// DCTCP take 0.98-1.03".
func smarttFig10Claims(t *testing.T, regions []results.Region) {
	m := regionTable(t, regions, "smartt-fig10-cc", "(an incast")
	ccs := m.head[2:]
	best := map[string]bool{}
	for _, r := range m.rows {
		b, bv := "", 0.0
		for i, cc := range ccs {
			if v, _, _ := meanRange(t, r[2+i]); b == "" || v < bv {
				b, bv = cc, v
			}
		}
		if b == "smartt" {
			best[r[0]+" "+r[1]] = true
		}
	}
	want := []string{"64:1 256KiB", "64:1 512KiB", "64:1 2MiB", "32:1 512KiB", "32:1 2MiB", "16:1 2MiB"}
	for _, c := range want {
		if !best[c] {
			t.Errorf("SMaRTT is not the fastest at %s", c)
		}
	}
	if len(best) != len(want) {
		t.Errorf("SMaRTT is the fastest in %d cells; the page says %d", len(best), len(want))
	}
	get := func(n, size, cc string) float64 {
		for _, r := range m.rows {
			if r[0] == n && r[1] == size {
				for i, h := range m.head {
					if h == cc {
						v, _, _ := meanRange(t, r[i])
						return v
					}
				}
			}
		}
		t.Fatalf("no cell %s %s %s", n, size, cc)
		return 0
	}
	for _, c := range [][2]string{{"8:1", "512KiB"}, {"16:1", "256KiB"}, {"16:1", "512KiB"}} {
		if v := get(c[0], c[1], "smartt"); v < 1.275 || v > 1.505 {
			t.Errorf("%s %s: SMaRTT %.3f, the page says 1.28-1.50", c[0], c[1], v)
		}
		for _, cc := range []string{"bbr", "dctcp"} {
			if v := get(c[0], c[1], cc); v < 0.975 || v > 1.035 {
				t.Errorf("%s %s: %s %.3f, the page says 0.98-1.03", c[0], c[1], cc, v)
			}
		}
	}
}

// smarttFig11cClaims: SMaRTT's "slowest seed is faster than the fastest seed of any
// other"; EQDS "trims about 13 times what SMaRTT trims" and "is 2 % behind"; Swift "2-3 %
// behind, MPRDMA and DCTCP 5-6 %", BBR "26 %".
func smarttFig11cClaims(t *testing.T, regions []results.Region) {
	m := regionTable(t, regions, "smartt-fig11c", "4:1 ToR uplinks")
	col := "completion / ideal (min / median / max)"
	s := mmmCell(t, m.cell(t, col, "smartt"))
	behind := map[string][2]float64{"eqds": {0.015, 0.025}, "swift": {0.015, 0.03}, "mprdma": {0.045, 0.065},
		"dctcp": {0.045, 0.065}, "bbr": {0.25, 0.27}}
	for cc, want := range behind {
		o := mmmCell(t, m.cell(t, col, cc))
		if o[0] <= s[2] {
			t.Errorf("%s's fastest seed %.3f is not slower than SMaRTT's slowest %.3f", cc, o[0], s[2])
		}
		if g := o[1]/s[1] - 1; g < want[0] || g > want[1] {
			t.Errorf("%s is %.1f %% behind SMaRTT; the page says %.0f-%.0f %%", cc, 100*g, 100*want[0], 100*want[1])
		}
	}
	et, st := mmmCell(t, m.cell(t, "trims", "eqds")), mmmCell(t, m.cell(t, "trims", "smartt"))
	if r := et[1] / st[1]; r < 12.5 || r > 14.5 {
		t.Errorf("EQDS trims %.1f times SMaRTT's; the page says about 13", r)
	}
}

// meanRange parses a "centre (min..max)" cell (a mean or a median).
func meanRange(t *testing.T, cell string) (mean, lo, hi float64) {
	t.Helper()
	var err1, err2, err3 error
	m, rng, ok := strings.Cut(cell, " (")
	a, b, ok2 := strings.Cut(strings.TrimSuffix(rng, ")"), "..")
	mean, err1 = strconv.ParseFloat(m, 64)
	lo, err2 = strconv.ParseFloat(a, 64)
	hi, err3 = strconv.ParseFloat(b, 64)
	if !ok || !ok2 || err1 != nil || err2 != nil || err3 != nil {
		t.Fatalf("cell %q is not centre (min..max)", cell)
	}
	return mean, lo, hi
}

// smarttSwiftLBClaims: "REPS is the fastest of the three on both trees"; at 1:1 "PLB's
// completion is about 2.5 times REPS's" and "oblivious spraying is within 5 % of REPS";
// at 4:1 "REPS's and spraying's seeds overlap".
func smarttSwiftLBClaims(t *testing.T, regions []results.Region) {
	m := regionTable(t, regions, "smartt-swift-lb", "completion_rel")
	get := func(tree, lb string) (float64, float64, float64) {
		for i, h := range m.head {
			for _, r := range m.rows {
				if h == lb && len(r) > i && r[1] == tree {
					return meanRange(t, r[i])
				}
			}
		}
		t.Fatalf("no cell %s at %s:1", lb, tree)
		return 0, 0, 0
	}
	for _, tree := range []string{"1", "4"} {
		reps, _, _ := get(tree, "reps")
		ops, _, _ := get(tree, "ops")
		plb, _, _ := get(tree, "plb")
		if reps >= ops || reps >= plb {
			t.Errorf("%s:1: REPS %.3f is not the fastest (OPS %.3f, PLB %.3f)", tree, reps, ops, plb)
		}
	}
	reps, _, _ := get("1", "reps")
	ops, _, _ := get("1", "ops")
	plb, _, _ := get("1", "plb")
	if r := plb / reps; r < 2.3 || r > 2.7 {
		t.Errorf("1:1: PLB / REPS = %.2f; the page says about 2.5", r)
	}
	if ops/reps > 1.05 {
		t.Errorf("1:1: OPS / REPS = %.3f; the page says within 5 %%", ops/reps)
	}
	_, rlo, rhi := get("4", "reps")
	_, olo, ohi := get("4", "ops")
	if rhi < olo || ohi < rlo {
		t.Errorf("4:1: REPS (%.3f..%.3f) and OPS (%.3f..%.3f) do not overlap", rlo, rhi, olo, ohi)
	}
}

// smarttFig3Claims: SMaRTT's completion is the best of the three "by about 1 %, within the
// spread of the seeds (the three completion ranges overlap)"; its slowest flow is the
// earliest and its fastest the latest; once per 50 ACKs "costs about 2 %"; "N=10 is level"
// with per-ACK reaction.
func smarttFig3Claims(t *testing.T, regions []results.Region) {
	a := regionTable(t, regions, "smartt-fig3", "each min")
	both := mmmCell(t, a.cell(t, "completion / ideal", "SMaRTT (both)"))
	fast, slow := mmmCell(t, a.cell(t, "fastest flow us", "SMaRTT (both)")), mmmCell(t, a.cell(t, "slowest flow us", "SMaRTT (both)"))
	for _, other := range []string{"ECN only", "delay only"} {
		o := mmmCell(t, a.cell(t, "completion / ideal", other))
		if gain := o[1]/both[1] - 1; gain <= 0 || gain > 0.02 {
			t.Errorf("SMaRTT's median completion %.3f against %s's %.3f: not ahead by about 1 %%", both[1], other, o[1])
		}
		if o[0] > both[2] || both[0] > o[2] {
			t.Errorf("SMaRTT's completion range %v and %s's %v do not overlap", both, other, o)
		}
		of, os := mmmCell(t, a.cell(t, "fastest flow us", other)), mmmCell(t, a.cell(t, "slowest flow us", other))
		if fast[1] <= of[1] || slow[1] >= os[1] {
			t.Errorf("SMaRTT's FCTs (fastest %.0f, slowest %.0f us) not inside %s's (%.0f, %.0f)", fast[1], slow[1], other, of[1], os[1])
		}
	}
	// "the median over seeds of its [delay only's] fastest flow is the earliest of the three"
	d := mmmCell(t, a.cell(t, "fastest flow us", "delay only"))
	if e := mmmCell(t, a.cell(t, "fastest flow us", "ECN only")); d[1] >= e[1] || d[1] >= fast[1] {
		t.Errorf("delay only's fastest flow (median %.0f us) is not the earliest (ECN %.0f, SMaRTT %.0f)", d[1], e[1], fast[1])
	}
	b := regionTable(t, regions, "smartt-fig3", "bytes with")
	ratio := func(n string) float64 {
		f, err := strconv.ParseFloat(b.cell(t, "median / median at N=1", n), 64)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if r := ratio("50"); r < 1.015 || r > 1.025 {
		t.Errorf("N=50 / N=1 = %.3f; the page says about 2 %%", r)
	}
	if r := ratio("10"); r < 0.995 || r > 1.005 {
		t.Errorf("N=10 / N=1 = %.3f; the page says level", r)
	}
}
