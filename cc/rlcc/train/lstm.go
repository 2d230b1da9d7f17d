package train

import (
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/floats"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/rlcc/lstm"
	"github.com/smartt-transport/smartt/config"
)

// LSTMPolicy runs the LSTM teacher; OnDecision (optional) sees every decision.
type LSTMPolicy struct {
	Net        *lstm.LSTM
	BPTT       int // window each Decision carries (training)
	Cfg        Env
	OnDecision func(c *lstm.Controller, d *lstm.Decision)
	params     *lstm.Params
}

// Name implements Policy.
func (p *LSTMPolicy) Name() string { return "lstm" }

// NewController implements Policy.
func (p *LSTMPolicy) NewController(net config.Network, flow int) (cc.Controller, error) {
	if p.params == nil {
		lp, err := lstm.NewParams(p.Cfg.RLCC, net, p.Net)
		if err != nil {
			return nil, err
		}
		lp.BPTT, lp.OnDecision = p.BPTT, p.OnDecision
		p.params = lp
	}
	c := lstm.NewController(p.params)
	c.Flow = flow
	return c, nil
}

// LSTMConfig configures the LSTM teacher's training: Config's gradient (Hidden unused),
// truncated backpropagation through BPTT decisions, and every AllToAllEvery-th episode
// (0: none) an all-to-all on PaperTree of 64*m flows, m drawn log-uniformly from
// 2..MaxAllToAll (m = 1, one flow into each host, never congests: every decision there
// would only push the rate up) (the episode's seed as for an incast), 64 of its flows training.
type LSTMConfig struct {
	Config
	BPTT          int
	AllToAllEvery int
	MaxAllToAll   int
}

// DefaultLSTMConfig is the training of docs/rlcc.md's LSTM teacher (`smartt-lab rlcc
// lstm`): the MLP's recipe on incasts of up to 512 flows, 300 episodes, bounded to
// minutes on a shared host (an LSTM decision costs several MLP decisions, its gradient
// BPTT times more). All-to-all episodes are off by default (-a2a-every).
func DefaultLSTMConfig() LSTMConfig {
	c := DefaultConfig()
	c.Iterations, c.MaxFlows = 300, 512
	return LSTMConfig{Config: c, BPTT: 4, AllToAllEvery: 0, MaxAllToAll: 4}
}

// LSTMTrainer trains the LSTM teacher with the MLP's gradient (Trainer.update's): one
// step of g = mean_t(w_t * grad pi(o_t)) per full rollout, the gradient of the action at
// t through the last BPTT decisions of its flow.
type LSTMTrainer struct {
	Cfg   LSTMConfig
	Net   *lstm.LSTM
	Curve []Episode
	adam  adam
	grad  []float64
	buf   []lstmTransition
	sc    lstm.Grad
}

type lstmTransition struct {
	start lstm.LSTMState
	win   [lstm.MaxBPTT][lstm.LSTMIn]float64
	n     int
	w     float64
}

// NewLSTMTrainer starts from the seeded initial network (lstm.NewLSTM(Seed), its output
// layer scaled by 0.1).
func NewLSTMTrainer(c LSTMConfig) (*LSTMTrainer, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.BPTT < 1 || c.BPTT > lstm.MaxBPTT || c.AllToAllEvery < 0 || c.MaxAllToAll < 2 || c.MaxAllToAll > PaperTree.Hosts-1 {
		return nil, fmt.Errorf("train lstm: bptt %d (1..%d), all-to-all every %d (>= 0), max all-to-all %d (2..%d)",
			c.BPTT, lstm.MaxBPTT, c.AllToAllEvery, c.MaxAllToAll, PaperTree.Hosts-1)
	}
	net := lstm.NewLSTM(c.Seed)
	net.ScaleOutput(0.1)
	return &LSTMTrainer{Cfg: c, Net: net, adam: adam{M: make([]float64, lstm.LSTMParams), V: make([]float64, lstm.LSTMParams)},
		grad: make([]float64, lstm.LSTMParams), buf: make([]lstmTransition, 0, c.Rollout)}, nil
}

// Run trains Cfg.Iterations episodes.
func (t *LSTMTrainer) Run() error {
	for k := len(t.Curve); k < t.Cfg.Iterations; k++ {
		ep, err := t.episode(k)
		if err != nil {
			return err
		}
		t.Curve = append(t.Curve, ep)
		if p := t.Cfg.Progress; p != nil {
			kind := "incast"
			if ep.AllToAll {
				kind = "all-to-all"
			}
			fmt.Fprintf(p, "iter %4d  %-10s N=%5d  decisions %6d  updates %3d  mean reward %8.4f (second half %8.4f)  goodput %.3f  %.2fs\n",
				ep.Iter, kind, ep.Flows, ep.Decisions, ep.Updates, ep.Reward, ep.Steady, ep.Goodput, ep.Wall)
		}
	}
	return nil
}

// episode runs episode k (an incast, or an all-to-all every AllToAllEvery-th).
func (t *LSTMTrainer) episode(k int) (Episode, error) {
	c := t.Cfg
	n, seed := c.episodeDraw(k)
	a2a := c.AllToAllEvery > 0 && k%c.AllToAllEvery == c.AllToAllEvery-1
	if a2a {
		lo, hi := math.Log(2), math.Log(float64(c.MaxAllToAll)+1)
		f := (math.Log(float64(n)) - math.Log(float64(c.MinFlows))) / (math.Log(float64(c.MaxFlows)+1) - math.Log(float64(c.MinFlows)))
		n = PaperTree.Hosts * min(max(int(math.Exp(lo+(hi-lo)*f)), 2), c.MaxAllToAll)
	}
	ep := Episode{Iter: k, Flows: n, AllToAll: a2a}
	// An all-to-all makes many times an incast's decisions: only every stride-th flow's
	// go into the rollout (64 flows), so incasts and all-to-alls weigh alike per episode.
	stride := 1
	if a2a {
		stride = n / PaperTree.Hosts
	}
	half := c.EpisodeNs / 2
	var rsum, ssum float64
	var sn int
	var flows [][]*lstmPending
	pol := &LSTMPolicy{Net: t.Net, BPTT: c.BPTT, Cfg: c.Env, OnDecision: func(lc *lstm.Controller, d *lstm.Decision) {
		z := min(max(d.Delta/c.Env.RLCC.Target, -c.WeightClip), 1)
		rsum -= z * z
		ep.Decisions++
		if d.Now >= half {
			ssum -= z * z
			sn++
		}
		if lc.Flow%stride != 0 {
			return
		}
		for lc.Flow >= len(flows) {
			flows = append(flows, nil)
		}
		q := flows[lc.Flow]
		for _, p := range q {
			p.sum += z
			p.k++
		}
		for len(q) > 0 && q[0].k == c.Horizon {
			p := q[0]
			p.tr.w = p.sum / float64(c.Horizon)
			t.buf = append(t.buf, p.tr)
			q = q[1:]
			if len(t.buf) == c.Rollout {
				t.update()
				ep.Updates++
			}
		}
		flows[lc.Flow] = append(q, &lstmPending{tr: lstmTransition{start: d.Start, win: d.Win, n: d.N}})
	}}
	start := time.Now()
	if a2a {
		st, err := c.Env.RunTree(pol, PaperTree, "all-to-all", n, seed, half, c.EpisodeNs-half)
		if err != nil {
			return ep, err
		}
		ep.Goodput = st.Goodput
	} else {
		st, err := c.Env.Run(pol, n, seed, half, c.EpisodeNs-half)
		if err != nil {
			return ep, err
		}
		ep.Goodput, ep.Inflation = st.Goodput, st.Inflation
	}
	ep.Wall = time.Since(start).Seconds()
	if ep.Decisions > 0 {
		ep.Reward = rsum / float64(ep.Decisions)
	}
	if sn > 0 {
		ep.Steady = ssum / float64(sn)
	}
	return ep, nil
}

// lstmPending is a decision waiting for the Horizon deltas that credit it.
type lstmPending struct {
	tr  lstmTransition
	sum float64
	k   int
}

// update is Trainer.update's step with the LSTM's truncated-BPTT gradient.
func (t *LSTMTrainer) update() {
	clear(t.grad)
	inv := 1 / float64(len(t.buf))
	for i := range t.buf {
		tr := &t.buf[i]
		t.Net.AccumGrad(&t.sc, &tr.start, tr.win[:tr.n], tr.w*inv, t.grad)
	}
	if nrm := floats.Norm(t.grad, 2); nrm > t.Cfg.GradClip {
		floats.Scale(t.Cfg.GradClip/nrm, t.grad)
	}
	t.adam.step(t.Net.Theta[:], t.grad, t.Cfg.LR)
	t.buf = t.buf[:0]
}

// step is one Adam ascent step on th with gradient g.
func (a *adam) step(th, g []float64, lr float64) {
	a.T++
	const b1, b2, eps = 0.9, 0.999, 1e-8
	c1 := 1 - math.Pow(b1, float64(a.T))
	c2 := 1 - math.Pow(b2, float64(a.T))
	for i, v := range g {
		a.M[i] = b1*a.M[i] + (1-b1)*v
		a.V[i] = b2*a.V[i] + (1-b2)*v*v
		th[i] += lr * (a.M[i] / c1) / (math.Sqrt(a.V[i]/c2) + eps)
	}
}

// Meta is the provenance stored with the trained LSTM.
func (t *LSTMTrainer) Meta() map[string]any {
	c := t.Cfg
	return map[string]any{
		"generator": fmt.Sprintf("smartt-lab rlcc lstm -seed %d -iterations %d -min-flows %d -max-flows %d -episode %dus -lr %g -rollout %d -horizon %d -weight-clip %g -bptt %d -a2a-every %d -max-a2a %d",
			c.Seed, len(t.Curve), c.MinFlows, c.MaxFlows, c.EpisodeNs/1000, c.LR, c.Rollout, c.Horizon, c.WeightClip, c.BPTT, c.AllToAllEvery, c.MaxAllToAll),
		"algorithm": fmt.Sprintf("deterministic on-policy gradient as the MLP's (horizon %d, weight clip %g, Adam %g, gradient norm %g), truncated BPTT over %d decisions",
			c.Horizon, c.WeightClip, c.LR, c.GradClip, c.BPTT),
	}
}
