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
	root, err := results.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	regions, err := results.Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("fig3", func(t *testing.T) { smarttFig3Claims(t, regions) })
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
