package lstm

import (
	"math"
	"testing"

	"github.com/smartt-transport/smartt/cc/rlcc"
	"github.com/smartt-transport/smartt/config"
)

var testNet = config.Network{LinkRate: 100e9, BaseRTT: 10_000, MTU: 4096}

// countedForward is Forward written as plain scalar loops that count every operation:
// its result must equal Forward's bit for bit and its count LSTMCount's.
func countedForward(m *LSTM, delta, aPrev float64, st *LSTMState) (float64, LSTMOps) {
	var ops LSTMOps
	th := m.Theta[:]
	act := func(f func(float64) float64, v float64) float64 { ops.Activations++; return f(v) }
	layer := func(w, b int, x []float64, out int, f func(float64) float64) []float64 {
		y := make([]float64, out)
		for r := range out {
			s := th[b+r]
			ops.Adds++
			for c := range x {
				s += th[w+r*len(x)+c] * x[c]
				ops.MACs++
			}
			y[r] = s
			if f != nil {
				y[r] = act(f, s)
			}
		}
		return y
	}
	x1 := layer(lstmW1, lstmB1, []float64{delta, aPrev}, LSTMFC1, math.Tanh)
	x2 := layer(lstmW2, lstmB2, x1, LSTMFC2, math.Tanh)
	z := layer(lstmWx, lstmBg, x2, 4*LSTMHid, nil)
	for r := range z {
		for c := range LSTMHid {
			z[r] += th[lstmWh+r*LSTMHid+c] * st.H[c]
			ops.MACs++
		}
	}
	out := th[lstmBo]
	ops.Adds++
	for j := range LSTMHid {
		i, f := act(sigmoid, z[j]), act(sigmoid, z[LSTMHid+j])
		g, o := act(math.Tanh, z[2*LSTMHid+j]), act(sigmoid, z[3*LSTMHid+j])
		st.C[j] = f*st.C[j] + i*g
		st.H[j] = o * act(math.Tanh, st.C[j])
		ops.Elementwise += 4
		out += th[lstmWo+j] * st.H[j]
		ops.MACs++
	}
	return act(math.Tanh, out), ops
}

// TestLSTMArchitectureAndCount: the teacher has the paper's 2,753 weights, its operation
// count is the analytic one (2,640 multiply-adds, the paper's "2,600 FLOPS"), and Forward
// computes what the counted scalar version does, step after step of a flow's history.
func TestLSTMArchitectureAndCount(t *testing.T) {
	if LSTMParams != 2753 {
		t.Fatalf("LSTM has %d parameters, the paper's has 2753", LSTMParams)
	}
	want := LSTMCount()
	if want.MACs != 2640 || want.Flops() != 2*2640+113+64+129 {
		t.Fatalf("analytic count %+v (flops %d)", want, want.Flops())
	}
	m := NewLSTM(7)
	var a, b LSTMState
	for k := range 50 {
		d, ap := 0.064-0.01*float64(k%13), math.Sin(float64(k))
		u := m.Forward(d, ap, &a)
		v, ops := countedForward(m, d, ap, &b)
		if u != v || a != b {
			t.Fatalf("step %d: Forward %v, counted %v (states equal: %v)", k, u, v, a == b)
		}
		if ops != want {
			t.Fatalf("step %d: counted %+v, analytic %+v", k, ops, want)
		}
	}
	if a == (LSTMState{}) {
		t.Fatal("the recurrent state never moved")
	}
}

// TestLSTMStateAndSeed: the output depends on the flow's own history (the recurrent
// state), not only on the input; the same seed gives the same weights, another seed others.
func TestLSTMStateAndSeed(t *testing.T) {
	m := NewLSTM(1)
	var fresh, warmed LSTMState
	for range 10 {
		m.Forward(-0.2, 0.5, &warmed)
	}
	if m.Forward(0, 0, &fresh) == m.Forward(0, 0, &warmed) {
		t.Error("same action after different histories")
	}
	if NewLSTM(1).Theta != m.Theta || NewLSTM(2).Theta == m.Theta {
		t.Error("weights not a function of the seed")
	}
}

// TestLSTMDecisionAllocatesNothing: a decision of the LSTM flow, like the trees', makes
// no allocation.
func TestLSTMDecisionAllocatesNothing(t *testing.T) {
	f := NewLSTMFlow(NewLSTM(1), rlcc.DefaultConfig(), testNet)
	rtts := [4]int64{10_000, 16_000, 25_000, 12_000}
	i := 0
	if n := testing.AllocsPerRun(1000, func() { f.Decide(rtts[i&3]); i++ }); n != 0 {
		t.Fatalf("%v allocations per decision", n)
	}
	if f.Rate <= 0 || f.Rate > 1 || math.IsNaN(f.Rate) {
		t.Fatalf("rate %v", f.Rate)
	}
}

// BenchmarkLSTMDecision is one decision of the paper's original LSTM teacher, for Table I
// beside BenchmarkDecision (cc/rlcc, the trees) and BenchmarkNetDecision (the MLP).
func BenchmarkLSTMDecision(b *testing.B) {
	f := NewLSTMFlow(NewLSTM(1), rlcc.DefaultConfig(), testNet)
	rtts := [4]int64{10_000, 16_000, 25_000, 12_000}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		f.Decide(rtts[i&3])
		i++
	}
	b.ReportMetric(float64(LSTMCount().MACs), "MACs/decision")
}
