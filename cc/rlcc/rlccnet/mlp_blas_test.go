package rlccnet

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// addMatVec rounds as gonum's Dgemv (y = 1 w x + 1 y), which trained the embedded policy:
// bit for bit on every shape up to 9 x 40, with values of mixed magnitude and sign.
func TestAddMatVecMatchesBLAS(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	val := func() float64 { return (rng.Float64() - 0.5) * math.Pow(10, float64(rng.IntN(7)-3)) }
	for rows := 1; rows <= 9; rows++ {
		for cols := 1; cols <= 40; cols++ {
			for range 5 {
				w, x, y := make([]float64, rows*cols), make([]float64, cols), make([]float64, rows)
				for i := range w {
					w[i] = val()
				}
				for i := range x {
					x[i] = val()
				}
				for i := range y {
					y[i] = val()
				}
				want := append([]float64(nil), y...)
				blas64.Gemv(blas.NoTrans, 1, blas64.General{Rows: rows, Cols: cols, Stride: cols, Data: w},
					blas64.Vector{N: cols, Inc: 1, Data: x}, 1, blas64.Vector{N: rows, Inc: 1, Data: want})
				addMatVec(y, w, x)
				for i := range y {
					if math.Float64bits(y[i]) != math.Float64bits(want[i]) {
						t.Fatalf("%dx%d row %d: %v, BLAS %v", rows, cols, i, y[i], want[i])
					}
				}
			}
		}
	}
}

// AccumGrad adds the same gradient, bit for bit, as the BLAS version it replaced.
func TestAccumGradMatchesBLAS(t *testing.T) {
	for _, hidden := range [][]int{{12, 12}, {5}, {7, 3, 9}, {1}, {16, 16}} {
		m := NewMLP(hidden, 3)
		rng := rand.New(rand.NewPCG(4, 5))
		g, want := make([]float64, len(m.Theta)), make([]float64, len(m.Theta))
		for range 20 {
			var x [NumNetInputs]float64
			for i := range x {
				x[i] = rng.NormFloat64()
			}
			scale := rng.NormFloat64()
			a := m.AccumGrad(&x, scale, g)
			if b := blasAccumGrad(m, &x, scale, want); math.Float64bits(a) != math.Float64bits(b) {
				t.Fatalf("%v: output %v, BLAS %v", hidden, a, b)
			}
			for i := range g {
				if math.Float64bits(g[i]) != math.Float64bits(want[i]) {
					t.Fatalf("%v: gradient[%d] %v, BLAS %v", hidden, i, g[i], want[i])
				}
			}
		}
	}
}

// blasAccumGrad is AccumGrad as it was written with gonum's BLAS.
func blasAccumGrad(m *MLP, x *[NumNetInputs]float64, scale float64, g []float64) float64 {
	layer := func(theta []float64, l int) (blas64.General, blas64.Vector) {
		w, b := m.layer(theta, l)
		return blas64.General{Rows: m.Sizes[l], Cols: m.Sizes[l-1], Stride: m.Sizes[l-1], Data: w}, blas64.Vector{N: len(b), Inc: 1, Data: b}
	}
	a := m.Forward(x)
	L := len(m.Sizes) - 1
	grad := make([][]float64, len(m.Sizes))
	for l, s := range m.Sizes {
		grad[l] = make([]float64, s)
	}
	grad[L][0] = scale * (1 - a*a)
	for l := L; l >= 1; l-- {
		gw, gb := layer(g, l)
		d := blas64.Vector{N: m.Sizes[l], Inc: 1, Data: grad[l]}
		prev := blas64.Vector{N: m.Sizes[l-1], Inc: 1, Data: m.act[l-1]}
		blas64.Ger(1, d, prev, gw)
		blas64.Axpy(1, d, gb)
		if l > 1 {
			w, _ := layer(m.Theta, l)
			gp := grad[l-1]
			blas64.Gemv(blas.Trans, 1, w, d, 0, blas64.Vector{N: len(gp), Inc: 1, Data: gp})
			for i, h := range m.act[l-1] {
				gp[i] *= 1 - h*h
			}
		}
	}
	return a
}
