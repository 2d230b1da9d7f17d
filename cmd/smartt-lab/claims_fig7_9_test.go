package main

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// row returns the row whose first cells are keys.
func (m mdTable) row(t *testing.T, keys ...string) []string {
	t.Helper()
	for _, r := range m.rows {
		if len(r) < len(keys) {
			continue
		}
		match := true
		for i, k := range keys {
			match = match && r[i] == k
		}
		if match {
			return r
		}
	}
	t.Fatalf("%q: no row %v", m.title, keys)
	return nil
}

// at is the cell of column col in the row whose first cells are keys.
func (m mdTable) at(t *testing.T, col string, keys ...string) string {
	t.Helper()
	c := m.column(col)
	r := m.row(t, keys...)
	if c < 0 || c >= len(r) {
		t.Fatalf("%q: no column %q", m.title, col)
	}
	return r[c]
}

// near fails t unless got is want within tol (relative).
func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got/want-1) > tol {
		t.Errorf("%s: %.3f, the page says %.3f", what, got, want)
	}
}

// The sentences of docs/results/smartt.md under Fig. 7 hold for its tables.
func TestDocsClaimsSMaRTTFig7(t *testing.T) {
	regions := docsRegions(t)
	a := tableWith(t, regions, "smartt-fig7", "", "lb")
	med := func(m mdTable, col string, keys ...string) float64 { return mmmCell(t, m.at(t, col, keys...))[1] }
	const ci = "completion / ideal"
	repsA, repsH := med(a, ci, "reps", "asymmetric"), med(a, ci, "reps", "healthy")
	opsA, opsH := med(a, ci, "ops", "asymmetric"), med(a, ci, "ops", "healthy")
	near(t, "REPS asymmetric / healthy", repsA/repsH, 1.42, 0.01)
	near(t, "OPS asymmetric / healthy", opsA/opsH, 1.74, 0.01)
	if r := repsA / repsH / (1 / 0.75); r > 1.07 {
		t.Errorf("REPS %.3f of the fair share's bound: the page says within 7 %%", r)
	}
	near(t, "REPS p99 FCT", med(a, "p99 FCT us", "reps", "asymmetric"), 100, 0.01)
	near(t, "OPS p99 FCT", med(a, "p99 FCT us", "ops", "asymmetric"), 174, 0.01)
	if r := opsH / repsH; r < 1 || r > 1.01 {
		t.Errorf("healthy: OPS / REPS %.3f, the page says within 1 %%", r)
	}
	c := tableWith(t, regions, "smartt-fig7", "", "lb")
	for _, m := range tablesOf(regionBody(t, "smartt-fig7")) {
		if m.column("ACK EV") >= 0 {
			c = m
		}
	}
	lost := func(lb, ev string) float64 { return med(c, "lost on dead links", lb, ev) }
	data := func(lb, ev string) float64 { return med(c, "retransmissions - duplicates", lb, ev) }
	near(t, "REPS lost on dead links, own EVs", lost("reps", "own"), 31588, 0)
	near(t, "OPS lost on dead links, own EVs", lost("ops", "own"), 15433, 0)
	if notData := lost("reps", "own") - med(c, "data retransmissions", "reps", "own"); notData < 29000 {
		t.Errorf("REPS: %.0f lost packets not data, the page says at least 29,000", notData)
	}
	near(t, "data lost OPS / REPS", data("ops", "own")/data("reps", "own"), 4.2, 0.01)
	near(t, "completion OPS / REPS, own EVs", med(c, ci, "ops", "own")/med(c, ci, "reps", "own"), 1.28, 0.01)
	near(t, "lost on dead links OPS / REPS, echoed", lost("ops", "echoed")/lost("reps", "echoed"), 5.9, 0.01)
	near(t, "completion OPS / REPS, echoed", med(c, ci, "ops", "echoed")/med(c, ci, "reps", "echoed"), 1.70, 0.01)
}

// regionBody is the body of region name.
func regionBody(t *testing.T, name string) string {
	t.Helper()
	for _, r := range docsRegions(t) {
		if r.Name == name {
			return r.Body
		}
	}
	t.Fatalf("no region %s", name)
	return ""
}

// osuCell parses a Fig. 9 cell "REL (MEDIAN; MIN-MAX)".
func osuCell(t *testing.T, cell string) (rel, lo, hi float64) {
	t.Helper()
	f := strings.FieldsFunc(cell, func(r rune) bool { return strings.ContainsRune(" (;-)", r) })
	if len(f) < 4 {
		t.Fatalf("cell %q is not REL (MEDIAN; MIN-MAX)", cell)
	}
	var v [4]float64
	for i := range v {
		x, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			t.Fatalf("cell %q: %v", cell, err)
		}
		v[i] = x
	}
	return v[0], v[2], v[3]
}

// The sentences of docs/rlcc.md under Fig. 9 hold for its tables.
func TestDocsClaimsRLCCFig9(t *testing.T) {
	regions := docsRegions(t)
	m := tableWith(t, regions, "rlcc-fig9", "", "bytes per rank pair")
	col := func(cc string) string { return cc + ": relative (median us; min-max)" }
	for _, size := range []string{"32 B", "1 KiB", "8 KiB"} {
		for _, cc := range []string{"dcqcn", "swift", "rlcc"} {
			if rel, _, _ := osuCell(t, m.at(t, col(cc), size)); rel > 1.16 {
				t.Errorf("%s %s: %.2f, the page says every controller within 16 %%", size, cc, rel)
			}
		}
	}
	for size, want := range map[string]float64{"64 KiB": 1.49, "256 KiB": 1.73} {
		rel, rlo, _ := osuCell(t, m.at(t, col("rlcc"), size))
		near(t, size+" RL-CC relative", rel, want, 0)
		if m.at(t, "lowest", size) != "dcqcn" {
			t.Errorf("%s: lowest %s, the page says DCQCN", size, m.at(t, "lowest", size))
		}
		for _, cc := range []string{"dcqcn", "swift"} {
			if _, _, hi := osuCell(t, m.at(t, col(cc), size)); hi >= rlo {
				t.Errorf("%s: %s up to %.0f us, RL-CC from %.0f: the page says the ranges do not overlap", size, cc, hi, rlo)
			}
		}
		if rel, _, _ := osuCell(t, m.at(t, col("swift"), size)); rel < 1.08 || rel > 1.13 {
			t.Errorf("%s: Swift %.2f, the page says 1.08-1.13x", size, rel)
		}
	}
	s := tableWith(t, regions, "rlcc-fig9", "", "bytes per rank pair")
	for _, tb := range tablesOf(regionBody(t, "rlcc-fig9")) {
		if tb.column("ECN marks") >= 0 {
			s = tb
		}
	}
	for _, c := range []struct {
		size, cc string
		marks    float64
	}{{"64 KiB", "rlcc", 404}, {"256 KiB", "rlcc", 1610}, {"64 KiB", "dcqcn", 668}, {"256 KiB", "dcqcn", 4060}} {
		near(t, c.size+" "+c.cc+" ECN marks", s.num(t, "ECN marks", c.size, c.cc), c.marks, 0)
	}
}
