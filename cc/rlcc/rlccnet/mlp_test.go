package rlccnet

import (
	"math"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/rlcc"
	"github.com/smartt-transport/smartt/config"
)

var testNet = config.Network{LinkRate: 100e9, BaseRTT: 10_000, MTU: 4096}

// TestMLPGradientMatchesFiniteDifference checks backprop against central differences on
// every parameter of a [4, 12, 12, 1] network.
func TestMLPGradientMatchesFiniteDifference(t *testing.T) {
	m := NewMLP([]int{12, 12}, 3)
	for i := range m.Theta { // larger weights than the init, so every layer matters
		m.Theta[i] *= 3
	}
	x := [NumNetInputs]float64{0.7, -0.3, 1.9, 0.2}
	g := make([]float64, len(m.Theta))
	m.AccumGrad(&x, 1, g)
	const h = 1e-6
	worst := 0.0
	for i := range m.Theta {
		v := m.Theta[i]
		m.Theta[i] = v + h
		up := m.Forward(&x)
		m.Theta[i] = v - h
		dn := m.Forward(&x)
		m.Theta[i] = v
		num := (up - dn) / (2 * h)
		worst = max(worst, math.Abs(num-g[i]))
	}
	if worst > 1e-7 {
		t.Fatalf("max |backprop - finite difference| = %g over %d parameters", worst, len(g))
	}
}

func TestMultiplierActionUnitsInverse(t *testing.T) {
	for _, u := range []float64{-1, -0.5, -1e-9, 0, 0.3, 1} {
		m := Multiplier(u)
		if got := ActionUnits(m); math.Abs(got-u) > 1e-12 {
			t.Errorf("ActionUnits(Multiplier(%g)) = %g", u, got)
		}
	}
	if Multiplier(1) != 1.2 || math.Abs(Multiplier(-1)-1/1.2) > 1e-15 {
		t.Errorf("bounds: %g %g, want 1.2 and 1/1.2", Multiplier(1), Multiplier(-1))
	}
	if RTTReward(-100) != RewardClamp || RTTReward(1) != -0.8 || RTTReward(-0.064) != 0.8 {
		t.Errorf("RTTReward clamps: %g %g %g", RTTReward(-100), RTTReward(1), RTTReward(-0.064))
	}
}

func TestMLPFileRoundTripAndErrors(t *testing.T) {
	m := NewMLP([]int{12, 12}, 9)
	b, err := MarshalMLP(m, map[string]any{"seed": 9})
	if err != nil {
		t.Fatal(err)
	}
	m2, meta, err := ParseMLP(b)
	if err != nil {
		t.Fatal(err)
	}
	x := [NumNetInputs]float64{0.1, 0.2, -0.3, 0.4}
	if m.Forward(&x) != m2.Forward(&x) || meta["seed"] != 9.0 {
		t.Fatal("round trip changed the network")
	}
	for _, tc := range []struct{ edit, want string }{
		{`"format": "smartt-rlcc-mlp/1"`, "format"},
		{`"rtt_reward",`, "inputs"},
		{`"sizes": [`, "sizes"},
		{`"theta": [`, "parameters"},
	} {
		bad := strings.Replace(string(b), tc.edit, map[string]string{
			"format":     `"format": "x"`,
			"inputs":     `"rtt",`,
			"sizes":      `"sizes": [7, `,
			"parameters": `"theta": [1, `,
		}[tc.want], 1)
		if _, _, err := ParseMLP([]byte(bad)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("edit %s: err %v, want it to name %q", tc.edit, err, tc.want)
		}
	}
}

// TestNetControllerDecisionRule: one decision per RTT, the network's action applied as a
// multiplier within [1/1.2, 1.2], the observation as the tree controller's.
func TestNetControllerDecisionRule(t *testing.T) {
	net := config.Network{LinkRate: 100e9, BaseRTT: 10_000, MTU: 4096}
	m := NewMLP([]int{12, 12}, 1)
	for i := range m.Theta {
		m.Theta[i] *= 5
	}
	var ds []Decision
	p, err := NewNetParams(rlcc.DefaultConfig(), net, m)
	if err != nil {
		t.Fatal(err)
	}
	p.OnDecision = func(_ *NetController, d *Decision) { ds = append(ds, *d) }
	c := NewNet(p)
	r0 := c.Rate()
	c.OnAck(cc.Ack{Now: 30_000, RTT: 20_000})
	c.OnAck(cc.Ack{Now: 31_000, RTT: 20_000}) // sent before the decision: ignored
	c.OnAck(cc.Ack{Now: 60_000, RTT: 25_000})
	if len(ds) != 2 {
		t.Fatalf("%d decisions, want 2", len(ds))
	}
	d := ds[0]
	want := 0.064 - (2.0-1.5)*math.Sqrt(0.1)
	if math.Abs(d.Delta-want) > 1e-12 || d.HasPrev || !ds[1].HasPrev || ds[1].PrevIn != d.In {
		t.Fatalf("delta %g want %g; prev links %v %v", d.Delta, want, d.HasPrev, ds[1].HasPrev)
	}
	mult := Multiplier(d.U)
	if math.Abs(ds[1].X[rlcc.FeatActionPrev]-mult) > 1e-12 || math.Abs(ds[1].X[rlcc.FeatRate]-r0*mult) > 1e-12 {
		t.Fatalf("action %g not applied: rate %g -> %g", mult, r0, ds[1].X[rlcc.FeatRate])
	}
	p.OnDecision = nil
	if a := testing.AllocsPerRun(100, func() { c.decide(20_000, false) }); a != 0 {
		t.Fatalf("%g allocations per decision", a)
	}
}

// BenchmarkNetDecision is one decision of the float policy network (the teacher the
// trees replace: 4 -> 12 -> 12 -> 1, tanh), for comparison with BenchmarkDecision.
func BenchmarkNetDecision(b *testing.B) {
	p, err := NewNetParams(rlcc.DefaultConfig(), testNet, nil)
	if err != nil {
		b.Fatal(err)
	}
	c := NewNet(p)
	rtts := [4]int64{10_000, 16_000, 25_000, 12_000}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.decide(rtts[i&3], false)
		i++
	}
	b.ReportMetric(float64(p.Net.Flops()), "flops/decision")
}

// TestMLPFileLimits: widths up to 256 and four hidden layers are read; one more is refused.
func TestMLPFileLimits(t *testing.T) {
	for _, tc := range []struct {
		hidden []int
		ok     bool
	}{{[]int{256}, true}, {[]int{257}, false}, {[]int{1, 1, 1, 1}, true}, {[]int{1, 1, 1, 1, 1}, false}} {
		b, err := MarshalMLP(NewMLP(tc.hidden, 1), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = ParseMLP(b)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "sizes")) {
			t.Errorf("hidden %v: %v", tc.hidden, err)
		}
	}
}
