package train

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestFitSqrt: on exact data a*sqrt(N)+b the fit returns a and b with R^2 = 1; with
// noise it stays close and R^2 drops below 1; on data that grows linearly in N (Swift's
// divergence) R^2 is visibly lower; degenerate inputs are refused.
func TestFitSqrt(t *testing.T) {
	ns := []int{2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
	exact := make([]float64, len(ns))
	for i, n := range ns {
		exact[i] = 0.064*math.Sqrt(float64(n)) + 1.5
	}
	f, err := FitSqrt(ns, exact)
	if err != nil || math.Abs(f.A-0.064) > 1e-12 || math.Abs(f.B-1.5) > 1e-12 || math.Abs(f.R2-1) > 1e-12 {
		t.Fatalf("exact: %+v %v", f, err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	noisy := make([]float64, len(ns))
	for i := range ns {
		noisy[i] = exact[i] * (1 + 0.02*(2*rng.Float64()-1))
	}
	f, err = FitSqrt(ns, noisy)
	if err != nil || math.Abs(f.A-0.064) > 0.005 || math.Abs(f.B-1.5) > 0.05 || f.R2 >= 1 || f.R2 < 0.98 {
		t.Fatalf("noisy: %+v %v", f, err)
	}
	lin := make([]float64, len(ns))
	for i, n := range ns {
		lin[i] = 1.5 + 0.004*float64(n)
	}
	if f, _ = FitSqrt(ns, lin); f.R2 > 0.97 {
		t.Errorf("linear growth fits sqrt(N) with R^2 %.3f", f.R2)
	}
	for _, bad := range [][]int{{4}, {4, 4, 4}} {
		if _, err := FitSqrt(bad, make([]float64, len(bad))); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if _, err := FitSqrt(ns[:3], exact[:2]); err == nil {
		t.Error("length mismatch accepted")
	}
	names, fits, err := Fig3Fits([]Fig3Row{{Policy: "swift", Flows: 4, Inflation: Spread{Mean: 2}}, {Policy: "swift", Flows: 16, Inflation: Spread{Mean: 3}}})
	if err != nil || len(names) != 1 || math.Abs(fits["swift"].A-0.5) > 1e-12 || math.Abs(fits["swift"].B-1) > 1e-12 {
		t.Errorf("Fig3Fits: %v %+v %v", names, fits, err)
	}
}
