package rlcc

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/config"
)

var testNet = config.Network{LinkRate: 100e9, BaseRTT: 10_000, MTU: 4096}

// tiny is a hand-built ensemble: tree 0 splits on delta > 0 (bit 0) and delta_prev > 0
// (bit 1); tree 1 splits on action_prev > 1.
func tiny() *Model {
	return &Model{Format: FormatV1, Features: []string{"delta", "delta_prev", "action_prev"}, Bias: 1,
		Trees: []Tree{
			{Splits: []Split{{0, 0}, {1, 0}}, Leaves: []float64{-0.1, 0.05, -0.02, 0.15}},
			{Splits: []Split{{2, 1}}, Leaves: []float64{0.01, -0.03}},
		}}
}

func TestTreeTraversalKnownOutputs(t *testing.T) {
	m := tiny()
	if err := m.Validate(DefaultLimits); err != nil {
		t.Fatal(err)
	}
	e := Compile(m)
	cases := []struct {
		d0, d1, a1, want float64
	}{
		{-0.1, -0.1, 1.0, 1 - 0.1 + 0.01},  // leaf 0, leaf 0
		{0.01, -0.1, 1.0, 1 + 0.05 + 0.01}, // bit 0 only
		{-0.1, 0.02, 1.1, 1 - 0.02 - 0.03}, // bit 1; tree 1 right
		{0.03, 0.02, 1.2, 1 + 0.15 - 0.03}, // both bits
		{0, 0, 1, 1 - 0.1 + 0.01},          // borders are strict: x > border
	}
	for _, c := range cases {
		xf := [NumFeatures]float64{FeatDelta: c.d0, FeatDeltaPrev: c.d1, FeatActionPrev: c.a1}
		if got := m.PredictFloat(&xf); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("float %v: got %v want %v", c, got, c.want)
		}
		xi := [NumFeatures]int64{FeatDelta: toFixed(c.d0), FeatDeltaPrev: toFixed(c.d1), FeatActionPrev: toFixed(c.a1)}
		if got := FromFixed(e.Predict(&xi)); math.Abs(got-c.want) > 2.0/float64(one) {
			t.Errorf("fixed %v: got %v want %v", c, got, c.want)
		}
	}
	if e.Ops() != 2*3+2*2 {
		t.Errorf("ops %d", e.Ops())
	}
}

func TestModelJSONRoundTripAndLimits(t *testing.T) {
	b, err := tiny().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseModel(b, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Trees) != 2 || m.Trees[0].Leaves[3] != 0.15 {
		t.Fatalf("round trip: %+v", m)
	}
	if _, err := ParseModel(b, Limits{MaxTrees: 1, MaxDepth: 4}); err == nil || !strings.Contains(err.Error(), "max_trees") {
		t.Errorf("2 trees under max_trees 1: %v", err)
	}
	if _, err := ParseModel(b, Limits{MaxTrees: 10, MaxDepth: 1}); err == nil || !strings.Contains(err.Error(), "max_depth") {
		t.Errorf("depth 2 under max_depth 1: %v", err)
	}
	bad := bytes.Replace(b, []byte(`"delta_prev"`), []byte(`"jitter"`), 1)
	if _, err := ParseModel(bad, DefaultLimits); err == nil || !strings.Contains(err.Error(), "jitter") {
		t.Errorf("unknown feature: %v", err)
	}
}

func TestCatBoostImport(t *testing.T) {
	b, err := os.ReadFile("testdata/catboost_small.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ImportCatBoost(b, nil, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Features) != 2 || m.Features[0] != "delta" || m.Features[1] != "delta_prev" {
		t.Fatalf("features %v", m.Features)
	}
	if m.Bias != 0.98 || len(m.Trees) != 2 || len(m.Trees[0].Splits) != 2 || m.Trees[0].Leaves[2] != -0.16 {
		t.Fatalf("model %+v", m)
	}
	// CatBoost semantics: leaf index bit d = feature > border of split d; prediction =
	// scale * sum(leaves) + bias with scale 2.
	cases := []struct{ d0, d1, want float64 }{
		{-0.1, -0.1, 0.98 + 2*(-0.05-0.01)},
		{0.0, -0.1, 0.98 + 2*(0.02-0.01)},
		{-0.1, 0.01, 0.98 + 2*(-0.08-0.01)},
		{0.02, 0.01, 0.98 + 2*(0.04+0.03)},
	}
	e := Compile(m)
	for _, c := range cases {
		xf := [NumFeatures]float64{FeatDelta: c.d0, FeatDeltaPrev: c.d1}
		if got := m.PredictFloat(&xf); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%v: got %v want %v", c, got, c.want)
		}
		xi := [NumFeatures]int64{FeatDelta: toFixed(c.d0), FeatDeltaPrev: toFixed(c.d1)}
		if got := FromFixed(e.Predict(&xi)); math.Abs(got-c.want) > 1e-6 {
			t.Errorf("fixed %v: got %v want %v", c, got, c.want)
		}
	}
	// Feature names can be given when the export has none; too few is an error.
	if _, err := ImportCatBoost(b, []string{"delta"}, DefaultLimits); err == nil {
		t.Error("one name for two features accepted")
	}
	// A controller runs on an imported model.
	dir := t.TempDir()
	os.WriteFile(dir+"/m.json", b, 0o644)
	cfg := DefaultConfig()
	cfg.Model, cfg.ModelFormat = dir+"/m.json", "catboost"
	p, err := NewParams(cfg, testNet)
	if err != nil {
		t.Fatal(err)
	}
	c := New(p)
	c.OnAck(cc.Ack{Now: 100_000, RTT: 10_000})
	if c.Decisions() != 1 {
		t.Fatal("no decision on the imported model")
	}
}

// TestFixedMatchesFloat compares the integer decision path with a float64 reference on
// 100,000 random observations: features computed in float64 from the same raw inputs
// (RTT, base RTT, rate, history) and the float model. Tolerance (docs/rlcc.md): the
// action differs by at most 1e-5 unless a feature lies within 1e-6 of a split border
// (quantisation may flip that split); such observations must be under 0.1 %.
func TestFixedMatchesFloat(t *testing.T) {
	p, err := NewParams(DefaultConfig(), testNet)
	if err != nil {
		t.Fatal(err)
	}
	m := p.Model()
	rng := rand.New(rand.NewPCG(7, 7))
	const n = 100_000
	var maxErr, maxErrNear float64
	near := 0
	for range n {
		rtt := int64(float64(testNet.BaseRTT) * (0.9 + 5*rng.Float64()*rng.Float64()))
		s := toFixed(math.Sqrt(1e-4 + (1-1e-4)*rng.Float64()))
		d1 := toFixed(0.064 * (1 - 4*rng.Float64()))
		// The learned default reads the previous actions too: draw them over the clamp.
		a1 := toFixed(1/1.2 + (1.2-1/1.2)*rng.Float64())
		a2 := toFixed(1/1.2 + (1.2-1/1.2)*rng.Float64())
		xi := [NumFeatures]int64{FeatDelta: p.delta(rtt, s), FeatDeltaPrev: d1,
			FeatActionPrev: a1, FeatActionPrev2: a2, FeatRate: s * s >> fracBits}
		got := FromFixed(p.ens.Predict(&xi))

		infl := float64(rtt) / float64(testNet.BaseRTT)
		sf := FromFixed(s)
		xf := [NumFeatures]float64{FeatDelta: 0.064 - math.Max(infl-1.5, 0)*sf, FeatDeltaPrev: FromFixed(d1),
			FeatActionPrev: FromFixed(a1), FeatActionPrev2: FromFixed(a2), FeatRate: sf * sf}
		want := m.PredictFloat(&xf)
		d := math.Abs(got - want)
		isNear := false
		for _, tr := range m.Trees {
			for _, sp := range tr.Splits {
				if math.Abs(xf[featureIndex(m.Features[sp.Feature])]-sp.Border) < 1e-6 {
					isNear = true
				}
			}
		}
		if isNear {
			near++
			maxErrNear = max(maxErrNear, d)
		} else {
			maxErr = max(maxErr, d)
		}
	}
	t.Logf("fixed vs float over %d observations: max |error| %.3g (%d near a border, max %.3g there)", n, maxErr, near, maxErrNear)
	if maxErr > 1e-5 {
		t.Errorf("max error %.3g > 1e-5", maxErr)
	}
	if near > n/1000 {
		t.Errorf("%d observations within 1e-6 of a border", near)
	}
}

func TestOpCountBelow150(t *testing.T) {
	// The largest model the limits allow: 10 trees of depth 4.
	m := &Model{Format: FormatV1, Features: []string{"delta", "delta_prev", "action_prev"}, Bias: 1}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10 {
		var tr Tree
		for range 4 {
			tr.Splits = append(tr.Splits, Split{Feature: rng.IntN(3), Border: 0.1 * rng.NormFloat64()})
		}
		for range 16 {
			tr.Leaves = append(tr.Leaves, 0.02*rng.NormFloat64())
		}
		m.Trees = append(m.Trees, tr)
	}
	dir := t.TempDir()
	b, _ := m.Marshal()
	os.WriteFile(dir+"/m.json", b, 0o644)
	cfg := DefaultConfig()
	cfg.Model = dir + "/m.json"
	for _, mc := range []Config{DefaultConfig(), cfg} {
		p, err := NewParams(mc, testNet)
		if err != nil {
			t.Fatal(err)
		}
		a, b := New(p), New(p)
		maxOps := 0
		for i := range 2000 {
			rtt := int64(float64(testNet.BaseRTT) * (0.9 + 3*rng.Float64()))
			ops := a.decideCounted(rtt)
			b.Decide(rtt)
			if a.st != b.st || a.rate != b.rate || a.window != b.window {
				t.Fatalf("step %d: counted twin diverged: %+v vs %+v", i, a.st, b.st)
			}
			maxOps = max(maxOps, ops)
		}
		t.Logf("%d trees: %d ops per decision (%d in the trees)", p.ens.Trees(), maxOps, p.ens.Ops())
		if maxOps != p.DecisionOps() || a.Cost().Ops != maxOps {
			t.Errorf("counted %d, DecisionOps %d, Cost %d", maxOps, p.DecisionOps(), a.Cost().Ops)
		}
		if maxOps >= 150 {
			t.Errorf("%d ops per decision: must be < 150", maxOps)
		}
	}
}

func TestRateClamping(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MinRate = 0.001
	p, err := NewParams(cfg, testNet)
	if err != nil {
		t.Fatal(err)
	}
	c := New(p)
	if r := c.Rate(); math.Abs(r-0.1) > 1e-4 {
		t.Fatalf("initial rate %v", r)
	}
	now := int64(0)
	// Deep congestion: the rate falls by at most 1/min_action per decision, to min_rate.
	prev := c.Rate()
	for range 200 {
		now += 1_000_000
		c.OnAck(cc.Ack{Now: now, RTT: 50 * testNet.BaseRTT})
		r := c.Rate()
		if r < prev*cfg.MinAction*(1-1e-3) {
			t.Fatalf("rate fell from %v to %v in one decision", prev, r)
		}
		prev = r
	}
	if r := c.Rate(); math.Abs(r-0.001) > 1e-5 {
		t.Fatalf("rate %v after deep congestion, want min_rate 0.001", r)
	}
	if c.PacingRate() <= 0 || c.Window() < testNet.MTU {
		t.Fatalf("pacing %d window %d", c.PacingRate(), c.Window())
	}
	// No queue: the rate climbs to line rate and stays there.
	for range 400 {
		now += 1_000_000
		c.OnAck(cc.Ack{Now: now, RTT: testNet.BaseRTT})
		if c.Rate() > 1 {
			t.Fatalf("rate %v above line rate", c.Rate())
		}
	}
	if r := c.Rate(); r < 0.999 {
		t.Fatalf("rate %v with an empty network, want line rate", r)
	}
	if want := testNet.LinkRate / 8; math.Abs(float64(c.PacingRate()-want)) > float64(want)/1000 {
		t.Fatalf("pacing rate %d at line rate, want %d", c.PacingRate(), want)
	}
	// Actions are clamped: a model whose output is 5 moves the rate by max_action only.
	m := &Model{Format: FormatV1, Features: []string{"delta"}, Bias: 5, Trees: []Tree{{Splits: []Split{{0, 0}}, Leaves: []float64{0, 0}}}}
	b, _ := m.Marshal()
	dir := t.TempDir()
	os.WriteFile(dir+"/m.json", b, 0o644)
	cfg = DefaultConfig()
	cfg.Model = dir + "/m.json"
	p, _ = NewParams(cfg, testNet)
	c = New(p)
	c.OnAck(cc.Ack{Now: 1e6, RTT: testNet.BaseRTT})
	if r := c.Rate(); math.Abs(r/0.1-1.2) > 1e-3 {
		t.Fatalf("one decision of a=5 moved the rate to %v, want 0.12", r)
	}
}

func TestOneDecisionPerRTT(t *testing.T) {
	p, _ := NewParams(DefaultConfig(), testNet)
	c := New(p)
	c.OnAck(cc.Ack{Now: 100_000, RTT: 20_000})
	// Samples of packets sent before the decision (now - rtt < 100_000) are ignored.
	c.OnAck(cc.Ack{Now: 110_000, RTT: 20_000})
	c.OnLoss(cc.Loss{Now: 115_000, Cause: cc.LossTrim})
	if c.Decisions() != 1 {
		t.Fatalf("%d decisions", c.Decisions())
	}
	c.OnAck(cc.Ack{Now: 125_000, RTT: 20_000})
	if c.Decisions() != 2 {
		t.Fatalf("%d decisions", c.Decisions())
	}
	// A loss after an RTT decides as the deepest congestion: the rate falls.
	r := c.Rate()
	c.OnLoss(cc.Loss{Now: 150_000, Cause: cc.LossTrim})
	if c.Decisions() != 3 || c.Rate() >= r {
		t.Fatalf("loss: %d decisions, rate %v -> %v", c.Decisions(), r, c.Rate())
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Target = 0
	cfg.MaxAction = 3
	cfg.ModelFormat = "onnx"
	err := cfg.Validate()
	for _, f := range []string{"rlcc.target", "rlcc.max_action", "rlcc.model_format"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("error %v does not name %s", err, f)
		}
	}
	cfg = DefaultConfig()
	cfg.Model = "/nonexistent/model.json"
	if _, err := NewParams(cfg, testNet); err == nil || !strings.Contains(err.Error(), "rlcc.model") {
		t.Errorf("missing model file: %v", err)
	}
}

// TestTeacherModelIsReproducible: the reference model distilled from the rule-based
// teacher (testdata/teacher_model.json) is exactly what the distill generator produces.
func TestTeacherModelIsReproducible(t *testing.T) {
	m, err := Distill(DefaultFit)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/teacher_model.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Fatal("testdata/teacher_model.json differs from Distill(DefaultFit): run go run ./cc/rlcc/cmd/distill -o cc/rlcc/testdata/teacher_model.json")
	}
	if len(m.Trees) > 10 {
		t.Fatalf("%d trees", len(m.Trees))
	}
}

// treeTable is Table VI of a model through the integer inference (ActionTable's states).
func treeTable(t *testing.T, m *Model) [3][3]float64 {
	cfg := DefaultConfig()
	p, err := NewParamsWithModel(cfg, testNet, m)
	if err != nil {
		t.Fatal(err)
	}
	return ActionTable(func(x *[NumFeatures]float64) float64 {
		var q [NumFeatures]int64
		for i, v := range x {
			q[i] = toFixed(v)
		}
		return FromFixed(min(max(p.ens.Predict(&q), p.minA), p.maxA))
	}, cfg.Target)
}

// TestTeacherModelReproducesTableVI: the trees fitted to the rule-based teacher keep its
// pattern at the nine (previous, current) states of Table VI: within 0.03 of each cell,
// and the table's order down every column (the second-order reactions).
func TestTeacherModelReproducesTableVI(t *testing.T) {
	b, err := os.ReadFile("testdata/teacher_model.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseModel(b, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	cell := treeTable(t, m)
	for i := range 3 {
		for j := range 3 {
			if math.Abs(cell[i][j]-TableVI[i][j]) > 0.03 {
				t.Errorf("prev %d cur %d: %.3f, Table VI %.2f", i, j, cell[i][j], TableVI[i][j])
			}
		}
	}
	if ok := ColumnOrder(cell); ok != [3]bool{true, true, true} {
		t.Errorf("columns not increasing with the previous state: %v", cell)
	}
}

// TestDefaultModelTableVIOrdering: the learned default trees (distilled from the trained
// network, docs/rlcc.md) react as the paper's Table VI in order: every column increases
// from "previously under-utilised" to "previously congested", under-utilisation raises
// the rate and congestion lowers it. The values are not the paper's (docs/rlcc.md).
func TestDefaultModelTableVIOrdering(t *testing.T) {
	m, err := ParseModel(DefaultModelJSON(), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	cell := treeTable(t, m)
	t.Logf("learned trees: %.3f", cell)
	// Each column rises; a step may dip by less than the trees' fit error (DistillTol):
	// a redistillation moved one step by -0.010.
	if ok := ColumnOrderWithin(cell, DistillTol); ok != [3]bool{true, true, true} {
		t.Errorf("columns not increasing with the previous state within %.2f (%v): %.3f", DistillTol, ok, cell)
	}
	for i := range 3 {
		if cell[i][0] <= cell[i][1] || cell[i][1] <= cell[i][2] {
			t.Errorf("row %d not decreasing from under-utilised to congested: %.3f", i, cell[i])
		}
	}
	// First-order reactions, whatever the previous state (docs/rlcc.md): the rate rises
	// when under-utilised and falls when congested.
	for i := range 3 {
		if cell[i][0] <= 1 || cell[i][2] >= 1 {
			t.Errorf("row %d: first-order reactions wrong (want > 1 under-utilised, < 1 congested): %.3f", i, cell[i])
		}
	}
}

func TestStateBytesPinned(t *testing.T) {
	packed := 0
	st := reflect.TypeOf(state{})
	for i := range st.NumField() {
		packed += int(st.Field(i).Type.Size())
	}
	if StateBytes != packed {
		t.Fatalf("per-flow state packs to %d bytes, StateBytes says %d", packed, StateBytes)
	}
	if packed != 28 {
		t.Fatalf("per-flow state is %d bytes; update docs/rlcc.md and this pin", packed)
	}
	p, _ := NewParams(DefaultConfig(), testNet)
	c := New(p).Cost()
	if c.Name != "rlcc" || !c.IntegerOnly || c.StateBytes != 28 || c.GlobalBytes < p.ens.Bytes() {
		t.Fatalf("%+v", c)
	}
}

// BenchmarkDecision times one decision (10 trees of depth 4). Besides ns/op it reports
// the mean of the fastest batch of 10,000 decisions, the figure least disturbed by other
// work on a shared host.
func BenchmarkDecision(b *testing.B) {
	p, _ := NewParams(DefaultConfig(), testNet)
	c := New(p)
	rtts := [4]int64{10_000, 16_000, 25_000, 12_000}
	b.ReportAllocs()
	best := math.Inf(1)
	i := 0
	start := time.Now()
	for b.Loop() {
		c.Decide(rtts[i&3])
		i++
		if i%10_000 == 0 {
			now := time.Now()
			best = min(best, float64(now.Sub(start).Nanoseconds())/10_000)
			start = now
		}
	}
	if !math.IsInf(best, 1) {
		b.ReportMetric(best, "best-batch-ns/decision")
	}
}

func BenchmarkOnAck(b *testing.B) {
	p, _ := NewParams(DefaultConfig(), testNet)
	c := New(p)
	now := int64(0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now += 40_000
		c.OnAck(cc.Ack{Now: now, RTT: 10_000 + int64(i&7)*2000})
	}
}
