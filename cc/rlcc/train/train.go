package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/gonum/floats"

	"github.com/smartt-transport/smartt/cc/rlcc/rlccnet"
)

// Config configures training. Episode k runs an incast of N flows, N drawn log-uniformly
// from [MinFlows, MaxFlows] by a generator seeded with (Seed, k), for EpisodeNs of
// simulated time with simulator seed derived from (Seed, k): so a run is deterministic
// for its seed and resumable from any checkpoint.
type Config struct {
	Seed       uint64
	Iterations int     // episodes
	MinFlows   int     // smallest incast
	MaxFlows   int     // largest incast
	EpisodeNs  int64   // simulated time per episode
	Rollout    int     // transitions per gradient step (the paper's fixed-size rollout buffer)
	LR         float64 // Adam step size
	Hidden     []int   // hidden layer widths ([12, 12], NVIDIA's deployed shape)
	// WeightClip bounds the gradient weight delta/target to [-WeightClip, 1]: delta is
	// unbounded below (a loss is an RTT of 64 base RTTs), one loss must not outweigh a
	// rollout. Stabiliser, stated in docs/rlcc.md.
	WeightClip float64
	// Horizon is how many of a flow's next decisions credit an action: the weight of the
	// decision at t is the mean of delta/target over t+1..t+Horizon (1: only the state it
	// led to). The paper weights by the mean of delta over the trajectory; a finite
	// window keeps the credit local to the action (docs/rlcc.md).
	Horizon int
	// GradClip bounds the gradient's Euclidean norm before the Adam step (stabiliser).
	GradClip        float64
	Env             Env
	Dir             string    // checkpoints, policy.json, curve.csv, curve.png ("": none)
	CheckpointEvery int       // episodes between checkpoints (0: only at the end)
	Progress        io.Writer // one line per episode (nil: silent)
}

// DefaultConfig is the training of the embedded default policy.
func DefaultConfig() Config {
	return Config{Seed: 1, Iterations: 600, MinFlows: 2, MaxFlows: 1024, EpisodeNs: 5_000_000,
		Rollout: 1024, LR: 2e-3, Hidden: []int{12, 12}, WeightClip: 3, Horizon: 64, GradClip: 1,
		Env: DefaultEnv(), CheckpointEvery: 50}
}

// Validate checks the ranges, naming the field.
func (c Config) Validate() error {
	var errs []error
	bad := func(f string, a ...any) { errs = append(errs, fmt.Errorf("train: "+f, a...)) }
	if c.Iterations < 1 {
		bad("iterations = %d: must be >= 1", c.Iterations)
	}
	if c.MinFlows < 1 || c.MaxFlows < c.MinFlows || c.MaxFlows > 4096 {
		bad("flows %d..%d: need 1 <= min <= max <= 4096", c.MinFlows, c.MaxFlows)
	}
	if c.EpisodeNs < 100_000 || c.EpisodeNs > 1_000_000_000 {
		bad("episode = %d ns: must be in 100us..1s", c.EpisodeNs)
	}
	if c.Rollout < 1 || c.Rollout > 1<<20 {
		bad("rollout = %d: must be in 1..%d", c.Rollout, 1<<20)
	}
	if !(c.LR > 0 && c.LR < 1) {
		bad("lr = %g: must be in (0, 1)", c.LR)
	}
	if len(c.Hidden) < 1 || len(c.Hidden) > 4 {
		bad("hidden = %v: 1..4 layers", c.Hidden)
	}
	for _, h := range c.Hidden {
		if h < 1 || h > 256 {
			bad("hidden = %v: widths must be in 1..256", c.Hidden)
		}
	}
	if c.Horizon < 1 || c.Horizon > 1000 {
		bad("horizon = %d: must be in 1..1000", c.Horizon)
	}
	if !(c.WeightClip >= 1) || !(c.GradClip > 0) {
		bad("weight_clip = %g (>= 1), grad_clip = %g (> 0)", c.WeightClip, c.GradClip)
	}
	return errors.Join(errs...)
}

// Episode is one line of the learning curve.
type Episode struct {
	Iter      int
	Flows     int
	Decisions int
	Updates   int     // gradient steps taken during the episode
	Reward    float64 // mean over decisions of -(delta/target)^2, delta/target clipped to [-WeightClip, 1]
	Steady    float64 // the same over the second half of the episode (after the start-up)
	MeanDelta float64 // mean delta/target (clipped)
	Goodput   float64 // over the second half of the episode
	Inflation float64 // mean RTT inflation over the second half
	Wall      float64 // seconds
	AllToAll  bool    `json:",omitempty"` // an all-to-all on PaperTree (LSTM training), not an incast
}

// Trainer holds the policy and the optimiser state.
type Trainer struct {
	Cfg   Config
	Net   *rlccnet.MLP
	Curve []Episode
	Iter  int // episodes done
	adam  adam
	grad  []float64
	buf   []transition
}

type transition struct {
	in [rlccnet.NumNetInputs]float64
	w  float64
}

// pending is a decision waiting for the Horizon deltas that credit it.
type pending struct {
	in  [rlccnet.NumNetInputs]float64
	sum float64
	n   int
}

// adam is the Adam optimiser (Kingma and Ba) on a flat parameter vector.
type adam struct {
	M, V []float64
	T    int
}

// New starts a trainer from a seeded initial network.
func New(cfg Config) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	net := rlccnet.NewMLP(cfg.Hidden, cfg.Seed)
	n := len(net.Theta)
	return &Trainer{Cfg: cfg, Net: net, adam: adam{M: make([]float64, n), V: make([]float64, n)},
		grad: make([]float64, n), buf: make([]transition, 0, cfg.Rollout)}, nil
}

// episodeDraw returns episode k's flow count and simulator seed.
func (c Config) episodeDraw(k int) (int, uint64) {
	rng := rand.New(rand.NewPCG(c.Seed, uint64(k)+0x9e3779b9))
	lo, hi := math.Log(float64(c.MinFlows)), math.Log(float64(c.MaxFlows)+1)
	n := min(int(math.Exp(lo+(hi-lo)*rng.Float64())), c.MaxFlows)
	return max(n, c.MinFlows), rng.Uint64()
}

// Run trains until Cfg.Iterations episodes are done, writing checkpoints and the curve.
func (t *Trainer) Run() error {
	c := t.Cfg
	for t.Iter < c.Iterations {
		ep, err := t.episode(t.Iter)
		if err != nil {
			return err
		}
		t.Curve = append(t.Curve, ep)
		t.Iter++
		if c.Progress != nil {
			fmt.Fprintf(c.Progress, "iter %4d  N=%5d  decisions %6d  updates %3d  mean reward %8.4f (second half %8.4f)  mean delta/target %+.3f  goodput %.3f  inflation %.2f  %.2fs\n",
				ep.Iter, ep.Flows, ep.Decisions, ep.Updates, ep.Reward, ep.Steady, ep.MeanDelta, ep.Goodput, ep.Inflation, ep.Wall)
		}
		if c.Dir != "" && c.CheckpointEvery > 0 && t.Iter%c.CheckpointEvery == 0 && t.Iter < c.Iterations {
			if err := t.Checkpoint(filepath.Join(c.Dir, fmt.Sprintf("checkpoint_%04d.json", t.Iter))); err != nil {
				return err
			}
		}
	}
	if c.Dir != "" {
		return t.WriteOutputs()
	}
	return nil
}

// episode runs episode k, updating the policy every Rollout transitions.
func (t *Trainer) episode(k int) (Episode, error) {
	c := t.Cfg
	n, seed := c.episodeDraw(k)
	ep := Episode{Iter: k, Flows: n}
	var rsum, dsum, ssum float64
	var sn int
	half := c.EpisodeNs / 2
	flows := make([][]pending, n) // per flow, oldest first
	pol := &NetPolicy{Net: t.Net, Cfg: c.Env.RLCC, OnDecision: func(nc *rlccnet.NetController, d *rlccnet.Decision) {
		z := min(max(d.Delta/c.Env.RLCC.Target, -c.WeightClip), 1)
		rsum -= z * z
		dsum += z
		ep.Decisions++
		if d.Now >= half {
			ssum -= z * z
			sn++
		}
		for nc.Flow >= len(flows) { // a sender that reconnected has a new controller
			flows = append(flows, nil)
		}
		q := flows[nc.Flow]
		for i := range q {
			q[i].sum += z
			q[i].n++
		}
		// The decision at t is credited with the mean of delta_{t+1..t+Horizon}.
		for len(q) > 0 && q[0].n == c.Horizon {
			t.buf = append(t.buf, transition{in: q[0].in, w: q[0].sum / float64(c.Horizon)})
			q = q[1:]
			if len(t.buf) == c.Rollout {
				t.update()
				ep.Updates++
			}
		}
		flows[nc.Flow] = append(q, pending{in: d.In})
	}}
	start := time.Now()
	st, err := c.Env.Run(pol, n, seed, half, c.EpisodeNs-half)
	if err != nil {
		return ep, err
	}
	ep.Wall = time.Since(start).Seconds()
	ep.Goodput, ep.Inflation = st.Goodput, st.Inflation
	if ep.Decisions > 0 {
		ep.Reward = rsum / float64(ep.Decisions)
		ep.MeanDelta = dsum / float64(ep.Decisions)
	}
	if sn > 0 {
		ep.Steady = ssum / float64(sn)
	}
	return ep, nil
}

// update is one step of the deterministic on-policy gradient (the paper's Eq. 3):
// g = mean_t(w_t * grad_theta pi(o_t)), ascended with Adam, then the buffer is emptied.
func (t *Trainer) update() {
	clear(t.grad)
	inv := 1 / float64(len(t.buf))
	for i := range t.buf {
		tr := &t.buf[i]
		t.Net.AccumGrad(&tr.in, tr.w*inv, t.grad)
	}
	if nrm := floats.Norm(t.grad, 2); nrm > t.Cfg.GradClip {
		floats.Scale(t.Cfg.GradClip/nrm, t.grad)
	}
	a := &t.adam
	a.T++
	const b1, b2, eps = 0.9, 0.999, 1e-8
	c1 := 1 - math.Pow(b1, float64(a.T))
	c2 := 1 - math.Pow(b2, float64(a.T))
	th := t.Net.Theta
	for i, g := range t.grad {
		a.M[i] = b1*a.M[i] + (1-b1)*g
		a.V[i] = b2*a.V[i] + (1-b2)*g*g
		th[i] += t.Cfg.LR * (a.M[i] / c1) / (math.Sqrt(a.V[i]/c2) + eps) // ascent
	}
	t.buf = t.buf[:0]
}

// checkpoint is a resumable training state.
type checkpoint struct {
	Format string          `json:"format"`
	Iter   int             `json:"iter"`
	Config json.RawMessage `json:"config"`
	Policy json.RawMessage `json:"policy"`
	Adam   adam            `json:"adam"`
	Buffer [][5]float64    `json:"buffer"` // pending transitions: 4 inputs, weight
	Curve  []Episode       `json:"curve"`
}

// Checkpoint writes the training state (policy, optimiser, pending rollout, curve).
func (t *Trainer) Checkpoint(path string) error {
	pol, err := rlccnet.MarshalMLP(t.Net, t.meta())
	if err != nil {
		return err
	}
	cb, _ := json.Marshal(t.Cfg.key())
	ck := checkpoint{Format: "smartt-rlcc-train/1", Iter: t.Iter, Config: cb, Policy: pol, Adam: t.adam, Curve: t.Curve}
	for _, tr := range t.buf {
		ck.Buffer = append(ck.Buffer, [5]float64{tr.in[0], tr.in[1], tr.in[2], tr.in[3], tr.w})
	}
	b, err := json.Marshal(ck)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Resume loads a checkpoint written with the same configuration (Iterations may differ).
func Resume(cfg Config, path string) (*Trainer, error) {
	t, err := New(cfg)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ck checkpoint
	if err := json.Unmarshal(b, &ck); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	want, _ := json.Marshal(cfg.key())
	if string(want) != string(ck.Config) {
		return nil, fmt.Errorf("checkpoint %s: trained with %s, not %s", path, ck.Config, want)
	}
	net, _, err := rlccnet.ParseMLP(ck.Policy)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if len(net.Theta) != len(t.Net.Theta) || len(ck.Adam.M) != len(net.Theta) || len(ck.Adam.V) != len(net.Theta) {
		return nil, fmt.Errorf("checkpoint %s: parameter counts do not match", path)
	}
	t.Net, t.adam, t.Iter, t.Curve = net, ck.Adam, ck.Iter, ck.Curve
	for _, v := range ck.Buffer {
		t.buf = append(t.buf, transition{in: [4]float64{v[0], v[1], v[2], v[3]}, w: v[4]})
	}
	return t, nil
}

// key is what must match for a checkpoint to be resumed (everything but the length of
// the run and where its outputs go).
func (c Config) key() any {
	return struct {
		Seed               uint64
		MinFlows, MaxFlows int
		EpisodeNs          int64
		Rollout            int
		LR                 float64
		Hidden             []int
		WeightClip         float64
		Horizon            int
		GradClip           float64
		Env                Env
	}{c.Seed, c.MinFlows, c.MaxFlows, c.EpisodeNs, c.Rollout, c.LR, c.Hidden, c.WeightClip, c.Horizon, c.GradClip, c.Env}
}

// meta is the provenance stored with a policy.
func (t *Trainer) meta() map[string]any {
	c := t.Cfg
	return map[string]any{
		"generator": fmt.Sprintf("smartt-lab rlcc train -seed %d -iterations %d -min-flows %d -max-flows %d -episode %dus -rollout %d -lr %g -horizon %d -weight-clip %g", c.Seed, t.Iter, c.MinFlows, c.MaxFlows, c.EpisodeNs/1000, c.Rollout, c.LR, c.Horizon, c.WeightClip),
		"algorithm": fmt.Sprintf("deterministic on-policy gradient: g = mean_t(w_t * grad pi(o_t)), w_t = mean of clip(delta/target, -%g, 1) over the flow's next %d decisions; Adam; gradient norm clipped to %g", c.WeightClip, c.Horizon, c.GradClip),
		"iter":      t.Iter,
	}
}

// Policy returns the current policy in its file format.
func (t *Trainer) Policy() ([]byte, error) { return rlccnet.MarshalMLP(t.Net, t.meta()) }

// WriteOutputs writes policy.json, curve.csv and curve.png into Cfg.Dir.
func (t *Trainer) WriteOutputs() error {
	d := t.Cfg.Dir
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	b, err := t.Policy()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d, "policy.json"), b, 0o644); err != nil {
		return err
	}
	if err := WriteCurveCSV(filepath.Join(d, "curve.csv"), t.Curve); err != nil {
		return err
	}
	return PlotCurve(filepath.Join(d, "curve.png"), t.Curve)
}
