package rlcc

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// TableVI is the action RL-CC learned, by previous (row) and current (column) system
// condition: under-utilised, on target, congested (the RL-CC on NICs paper's Table VI).
var TableVI = [3][3]float64{
	{1.05, 0.92, 0.89},
	{1.10, 1.00, 0.90},
	{1.15, 1.07, 0.94},
}

// TeacherDeepSlope is how much harsher (per unit of delta/target below -1) the teacher
// decreases in congestion deeper than Table VI's "congested" point.
const TeacherDeepSlope = 0.02

// Teacher is the rule policy the default model is distilled from, written down from the
// RL-CC on NICs paper (docs/rlcc.md, docs/references.md): with z = delta/target,
//
//   - z = +1 is "under-utilised" (RTT inflation <= beta, delta at its maximum, target),
//     z = 0 "on target" (delta = 0, the reward's fixed point, where the action is 1),
//     z = -1 "congested" (delta = -target);
//   - between these points the action is the bilinear interpolation of Table VI over
//     (previous z, current z);
//   - below z = -1 the action falls by TeacherDeepSlope per unit of z (faster reaction to
//     deep congestion), and every action is clamped to [1/1.2, 1.2] (at most 20 % a step).
func Teacher(delta, deltaPrev, target float64) float64 {
	z0, z1 := delta/target, deltaPrev/target
	g0 := 1 - min(max(z0, -1), 1) // grid coordinate 0 (U) .. 2 (C)
	g1 := 1 - min(max(z1, -1), 1)
	a := bilinear(g1, g0)
	if z0 < -1 {
		a -= TeacherDeepSlope * (-z0 - 1)
	}
	return min(max(a, 1/1.2), 1.2)
}

func bilinear(r, c float64) float64 {
	r0, c0 := min(int(r), 1), min(int(c), 1)
	fr, fc := r-float64(r0), c-float64(c0)
	t := &TableVI
	return (1-fr)*((1-fc)*t[r0][c0]+fc*t[r0][c0+1]) + fr*((1-fc)*t[r0+1][c0]+fc*t[r0+1][c0+1])
}

// FitConfig configures gradient boosting of oblivious trees (RMSE loss, as the paper's
// CatBoost distillation).
type FitConfig struct {
	Trees        int     // boosting iterations (<= 10 for the NIC)
	Depth        int     // depth of every tree (<= 4)
	LearningRate float64 // shrinkage of each tree's leaves
	L2           float64 // L2 regularisation of leaf values (CatBoost's l2_leaf_reg)
	Borders      int     // candidate split borders per feature (quantiles of the data)
	Samples      int     // training observations drawn
	Seed         uint64  // of the sampler
	Target       float64 // the teacher's target (0.064)
}

// DefaultFit is the configuration the embedded default model was built with.
var DefaultFit = FitConfig{Trees: 10, Depth: 4, LearningRate: 0.5, L2: 3, Borders: 64,
	Samples: 20000, Seed: 1, Target: 0.064}

// Distill samples observations, labels them with Teacher and fits an ensemble. The
// observations are (delta, delta_prev) with z = delta/target drawn per coordinate from
// a mixture that concentrates near the fixed point: 50 % N(0, 0.35), 30 % U[-1.5, 1],
// 20 % U[-8, 1], each capped at 1 (delta <= target always).
func Distill(fc FitConfig) (*Model, error) {
	if fc.Trees < 1 || fc.Depth < 1 || fc.Depth > 8 || fc.Samples < 100 || fc.Borders < 1 {
		return nil, fmt.Errorf("distill: bad fit config %+v", fc)
	}
	rng := rand.New(rand.NewPCG(fc.Seed, 0x5ca1ab1e))
	draw := func() float64 {
		var z float64
		switch u := rng.Float64(); {
		case u < 0.5:
			z = rng.NormFloat64() * 0.35
		case u < 0.8:
			z = -1.5 + 2.5*rng.Float64()
		default:
			z = -8 + 9*rng.Float64()
		}
		return min(z, 1) * fc.Target
	}
	X := make([][]float64, 2)
	X[0] = make([]float64, fc.Samples)
	X[1] = make([]float64, fc.Samples)
	y := make([]float64, fc.Samples)
	for i := range y {
		X[0][i], X[1][i] = draw(), draw()
		y[i] = Teacher(X[0][i], X[1][i], fc.Target)
	}
	m := Fit(X, y, []string{FeatureNames[FeatDelta], FeatureNames[FeatDeltaPrev]}, fc)
	// Report the fit in the model's provenance.
	var se, maxe float64
	for i := range y {
		x := [NumFeatures]float64{FeatDelta: X[0][i], FeatDeltaPrev: X[1][i]}
		d := m.PredictFloat(&x) - y[i]
		se += d * d
		maxe = max(maxe, math.Abs(d))
	}
	m.Meta = map[string]any{
		"generator":           "go run ./cc/rlcc/cmd/distill (rlcc.Distill with rlcc.DefaultFit)",
		"teacher":             "rlcc.Teacher: bilinear Table VI over (delta_prev, delta)/target, fixed point a(0,0)=1, deep-congestion slope 0.02, clamp [1/1.2, 1.2]",
		"fit":                 fmt.Sprintf("%d oblivious trees of depth %d, RMSE loss, learning rate %g, l2 %g, %d quantile borders, %d samples, seed %d", fc.Trees, fc.Depth, fc.LearningRate, fc.L2, fc.Borders, fc.Samples, fc.Seed),
		"train_rmse":          round6(math.Sqrt(se / float64(len(y)))),
		"train_max_abs_error": round6(maxe),
	}
	return m, nil
}

func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }

// Fit is gradient boosting of oblivious trees with RMSE loss: the bias starts at the
// mean label; each tree picks, level by level, the (feature, border) that most reduces
// the squared error of the residual over all of its current leaves (one split per level,
// as CatBoost's symmetric trees), and its leaves are LearningRate * sum/(count + L2) of
// the residuals they hold. X is indexed [feature][sample].
func Fit(X [][]float64, y []float64, names []string, fc FitConfig) *Model {
	n := len(y)
	borders := make([][]float64, len(X))
	for f := range X {
		borders[f] = quantileBorders(X[f], fc.Borders)
	}
	var bias float64
	for _, v := range y {
		bias += v
	}
	bias /= float64(n)
	m := &Model{Format: FormatV1, Features: names, Bias: round9(bias)}
	pred := make([]float64, n)
	for i := range pred {
		pred[i] = m.Bias
	}
	res := make([]float64, n)
	leaf := make([]int, n)
	nl := 1 << fc.Depth
	sum := make([]float64, 2*nl)
	cnt := make([]float64, 2*nl)
	for range fc.Trees {
		for i := range res {
			res[i] = y[i] - pred[i]
			leaf[i] = 0
		}
		var tr Tree
		for d := range fc.Depth {
			bestScore, bestF, bestB := math.Inf(-1), -1, 0.0
			for f := range X {
				for _, b := range borders[f] {
					clear(sum)
					clear(cnt)
					xs := X[f]
					for i, v := range xs {
						k := leaf[i]
						if v > b {
							k |= 1 << d
						}
						sum[k] += res[i]
						cnt[k]++
					}
					score := 0.0
					for k := range 2 << d {
						score += sum[k] * sum[k] / (cnt[k] + fc.L2)
					}
					if score > bestScore+1e-12 {
						bestScore, bestF, bestB = score, f, b
					}
				}
			}
			tr.Splits = append(tr.Splits, Split{Feature: bestF, Border: bestB})
			for i, v := range X[bestF] {
				if v > bestB {
					leaf[i] |= 1 << d
				}
			}
		}
		clear(sum)
		clear(cnt)
		for i := range res {
			sum[leaf[i]] += res[i]
			cnt[leaf[i]]++
		}
		tr.Leaves = make([]float64, nl)
		for k := range nl {
			tr.Leaves[k] = round9(fc.LearningRate * sum[k] / (cnt[k] + fc.L2))
		}
		for i := range pred {
			pred[i] += tr.Leaves[leaf[i]]
		}
		m.Trees = append(m.Trees, tr)
	}
	return m
}

// quantileBorders returns up to k borders: midpoints between distinct sorted values at
// the k quantiles of xs.
func quantileBorders(xs []float64, k int) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	var out []float64
	for q := 1; q <= k; q++ {
		i := q * len(s) / (k + 1)
		if i <= 0 || i >= len(s) || s[i-1] == s[i] {
			continue
		}
		b := round9((s[i-1] + s[i]) / 2)
		if len(out) == 0 || b > out[len(out)-1] {
			out = append(out, b)
		}
	}
	return out
}

// round9 keeps the model file short and its numbers exact when read back.
func round9(v float64) float64 { return math.Round(v*1e9) / 1e9 }
