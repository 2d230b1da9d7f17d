package lstm

import (
	"math"
	"math/rand/v2"
	"testing"
)

// randomWindow is a start state and k inputs drawn from the ranges the controller feeds.
func randomWindow(rng *rand.Rand, k int) (LSTMState, [][LSTMIn]float64) {
	var st LSTMState
	for j := range LSTMHid {
		st.H[j], st.C[j] = rng.Float64()-0.5, 2*rng.Float64()-1
	}
	in := make([][LSTMIn]float64, k)
	for t := range in {
		in[t] = [LSTMIn]float64{-0.8 + 4*rng.Float64(), 2*rng.Float64() - 1}
	}
	return st, in
}

// The truncated-BPTT gradient equals central finite differences of the windowed output
// for every parameter class (FC, gates, recurrent, output), and its output is Forward's.
func TestAccumGradMatchesFiniteDifference(t *testing.T) {
	m := NewLSTM(3)
	rng := rand.New(rand.NewPCG(5, 6))
	for j := range m.Theta { // nonzero biases so every path carries gradient
		m.Theta[j] += 0.1 * (rng.Float64() - 0.5)
	}
	var sc Grad
	for _, k := range []int{1, 4, MaxBPTT} {
		st, in := randomWindow(rng, k)
		g := make([]float64, LSTMParams)
		y := m.AccumGrad(&sc, &st, in, 1, g)
		fst := st
		var fy float64
		for _, x := range in {
			fy = m.Forward(x[0], x[1], &fst)
		}
		if y != fy {
			t.Fatalf("k=%d: AccumGrad output %v, Forward %v", k, y, fy)
		}
		out := func() float64 {
			s := st
			var v float64
			for _, x := range in {
				v = m.Forward(x[0], x[1], &s)
			}
			return v
		}
		bad := 0
		for j := 0; j < LSTMParams; j += 7 {
			th := m.Theta[j]
			const h = 1e-6
			m.Theta[j] = th + h
			up := out()
			m.Theta[j] = th - h
			dn := out()
			m.Theta[j] = th
			fd := (up - dn) / (2 * h)
			if math.Abs(fd-g[j]) > 1e-6+1e-4*math.Abs(fd) {
				bad++
				t.Errorf("k=%d theta[%d]: gradient %g, finite difference %g", k, j, g[j], fd)
			}
			if bad > 5 {
				t.FailNow()
			}
		}
	}
}

func TestAccumGradAllocatesNothing(t *testing.T) {
	m := NewLSTM(1)
	var sc Grad
	st, in := randomWindow(rand.New(rand.NewPCG(1, 2)), 4)
	g := make([]float64, LSTMParams)
	if n := testing.AllocsPerRun(100, func() { m.AccumGrad(&sc, &st, in, 0.5, g) }); n != 0 {
		t.Fatalf("AccumGrad allocates %v per call", n)
	}
}
