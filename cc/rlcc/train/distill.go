package train

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"

	"github.com/smartt-transport/smartt/cc/rlcc"
	"github.com/smartt-transport/smartt/cc/rlcc/lstm"
	"github.com/smartt-transport/smartt/cc/rlcc/rlccnet"
)

// DistillConfig configures the distillation of a trained policy into trees: record the
// policy's own (observation, action) pairs in the simulator (on-policy states, as the
// paper), then fit boosted oblivious trees by RMSE.
type DistillConfig struct {
	Seed       uint64
	Episodes   int   // recording episodes, N drawn log-uniformly like training
	MinFlows   int   // smallest incast
	MaxFlows   int   // largest incast
	EpisodeNs  int64 // simulated time per episode
	PerEpisode int   // at most this many decisions kept per episode (every k-th)
	HoldOut    int   // every HoldOut-th episode is held out of the fit (test set)
	Fit        rlcc.FitConfig
	Env        Env
	Progress   io.Writer
}

// DefaultDistillConfig is the distillation of the embedded default model.
func DefaultDistillConfig() DistillConfig {
	fc := rlcc.DefaultFit
	fc.Seed = 0 // unused: the samples come from the simulator
	return DistillConfig{Seed: 1, Episodes: 30, MinFlows: 2, MaxFlows: 1024, EpisodeNs: 5_000_000,
		PerEpisode: 2000, HoldOut: 5, Fit: fc, Env: DefaultEnv()}
}

// DistillFeatures are the tree model's features: the network's inputs as the integer
// controller computes them (delta and actions as multipliers; a monotone map of the
// network's rtt_reward and tanh units, so the trees split at the same points).
var DistillFeatures = []int{rlcc.FeatDelta, rlcc.FeatDeltaPrev, rlcc.FeatActionPrev, rlcc.FeatActionPrev2}

// DistillReport is the fit and its held-out error.
type DistillReport struct {
	Train, Test      int     // samples
	TrainRMSE        float64 // multiplier units
	TestRMSE         float64
	TestMaxAbs       float64
	TestMeanAbsInput float64 // mean |a - 1| of the policy on the test set, for scale
}

// Distill records the policy network's decisions and fits trees.
func Distill(net *rlccnet.MLP, policyJSON []byte, dc DistillConfig) (*rlcc.Model, DistillReport, error) {
	sum := sha256.Sum256(policyJSON)
	teacher := "policy network sha256 " + hex.EncodeToString(sum[:8]) + " (rlccnet.MLP), recorded on-policy in test/sim incasts"
	return distill(func(rec func(x *[rlcc.NumFeatures]float64, u float64)) Policy {
		return &NetPolicy{Net: net, Cfg: dc.Env.RLCC, OnDecision: func(_ *rlccnet.NetController, d *rlccnet.Decision) { rec(&d.X, d.U) }}
	}, teacher, dc)
}

// DistillLSTM records the LSTM teacher's decisions (the paper's distillation of its
// LSTM) and fits trees on the same features as Distill's.
func DistillLSTM(net *lstm.LSTM, policyJSON []byte, dc DistillConfig) (*rlcc.Model, DistillReport, error) {
	sum := sha256.Sum256(policyJSON)
	teacher := "LSTM sha256 " + hex.EncodeToString(sum[:8]) + " (lstm.LSTM), recorded on-policy in test/sim incasts"
	return distill(func(rec func(x *[rlcc.NumFeatures]float64, u float64)) Policy {
		return &LSTMPolicy{Net: net, Cfg: dc.Env, OnDecision: func(_ *lstm.Controller, d *lstm.Decision) { rec(&d.X, d.U) }}
	}, teacher, dc)
}

// distill records the decisions of the policies pol makes (rec sees each observation and
// output in tanh units) and fits trees.
func distill(pol func(rec func(x *[rlcc.NumFeatures]float64, u float64)) Policy, teacher string, dc DistillConfig) (*rlcc.Model, DistillReport, error) {
	var rep DistillReport
	if dc.Episodes < 2 || dc.HoldOut < 2 || dc.PerEpisode < 10 || dc.MinFlows < 1 || dc.MaxFlows < dc.MinFlows {
		return nil, rep, fmt.Errorf("distill: bad config: episodes %d (>= 2), hold_out %d (>= 2), per_episode %d (>= 10), flows %d..%d",
			dc.Episodes, dc.HoldOut, dc.PerEpisode, dc.MinFlows, dc.MaxFlows)
	}
	X := make([][]float64, len(DistillFeatures))
	var y []float64
	var tx [][rlcc.NumFeatures]float64
	var ty []float64
	draw := Config{Seed: dc.Seed ^ 0xd157111, MinFlows: dc.MinFlows, MaxFlows: dc.MaxFlows}
	for k := range dc.Episodes {
		n, seed := draw.episodeDraw(k)
		var xs [][rlcc.NumFeatures]float64
		var as []float64
		p := pol(func(x *[rlcc.NumFeatures]float64, u float64) {
			xs = append(xs, *x)
			as = append(as, min(max(rlccnet.Multiplier(u), dc.Env.RLCC.MinAction), dc.Env.RLCC.MaxAction))
		})
		st, err := dc.Env.Run(p, n, seed, dc.EpisodeNs/2, dc.EpisodeNs-dc.EpisodeNs/2)
		if err != nil {
			return nil, rep, err
		}
		step := max(1, (len(xs)+dc.PerEpisode-1)/dc.PerEpisode)
		test := k%dc.HoldOut == dc.HoldOut-1
		kept := 0
		for i := 0; i < len(xs); i += step {
			kept++
			if test {
				tx = append(tx, xs[i])
				ty = append(ty, as[i])
				continue
			}
			for f, fi := range DistillFeatures {
				X[f] = append(X[f], xs[i][fi])
			}
			y = append(y, as[i])
		}
		if dc.Progress != nil {
			role := "train"
			if test {
				role = "held out"
			}
			fmt.Fprintf(dc.Progress, "record %2d/%d  N=%5d  decisions %6d  kept %5d (%s)  goodput %.3f  inflation %.2f\n",
				k+1, dc.Episodes, n, len(xs), kept, role, st.Goodput, st.Inflation)
		}
	}
	if len(y) < 100 || len(ty) < 10 {
		return nil, rep, fmt.Errorf("distill: %d training and %d test samples: too few", len(y), len(ty))
	}
	names := make([]string, len(DistillFeatures))
	for i, f := range DistillFeatures {
		names[i] = rlcc.FeatureNames[f]
	}
	m := rlcc.Fit(X, y, names, dc.Fit)
	rep.Train, rep.Test = len(y), len(ty)
	var se float64
	for i := range y {
		var x [rlcc.NumFeatures]float64
		for f, fi := range DistillFeatures {
			x[fi] = X[f][i]
		}
		d := m.PredictFloat(&x) - y[i]
		se += d * d
	}
	rep.TrainRMSE = math.Sqrt(se / float64(len(y)))
	se = 0
	for i := range ty {
		d := m.PredictFloat(&tx[i]) - ty[i]
		se += d * d
		rep.TestMaxAbs = max(rep.TestMaxAbs, math.Abs(d))
		rep.TestMeanAbsInput += math.Abs(ty[i]-1) / float64(len(ty))
	}
	rep.TestRMSE = math.Sqrt(se / float64(len(ty)))
	m.Meta = map[string]any{
		"generator": fmt.Sprintf("smartt-lab rlcc distill -seed %d -episodes %d -min-flows %d -max-flows %d -episode %dus -per-episode %d -hold-out %d",
			dc.Seed, dc.Episodes, dc.MinFlows, dc.MaxFlows, dc.EpisodeNs/1000, dc.PerEpisode, dc.HoldOut),
		"teacher":         teacher,
		"fit":             fmt.Sprintf("%d oblivious trees of depth %d, RMSE loss, learning rate %g, l2 %g, %d quantile borders", dc.Fit.Trees, dc.Fit.Depth, dc.Fit.LearningRate, dc.Fit.L2, dc.Fit.Borders),
		"train_samples":   rep.Train,
		"test_samples":    rep.Test,
		"train_rmse":      round6(rep.TrainRMSE),
		"test_rmse":       round6(rep.TestRMSE),
		"test_max_abs":    round6(rep.TestMaxAbs),
		"test_mean_abs_a": round6(rep.TestMeanAbsInput),
	}
	return m, rep, nil
}

func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }
