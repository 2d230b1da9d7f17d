package train

import (
	"slices"
	"time"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/rlcc"
	"github.com/smartt-transport/smartt/cc/rlcc/lstm"
	"github.com/smartt-transport/smartt/cc/rlcc/rlccnet"
	"github.com/smartt-transport/smartt/config"
)

// Table1Arch is one architecture of the paper's Table I: its operation count and its
// decision time on this CPU, per round.
type Table1Arch struct {
	Name   string
	MACs   int       // multiply-adds (the paper's "FLOPS"); 0 for the trees
	Ops    int       // floating-point operations (trees: integer operations)
	Params int       // weights, or model bytes for the trees
	State  int       // per-flow state, bytes
	Ns     []float64 // ns per decision, one value per round
}

// table1RTTs are the RTT samples the timed decisions cycle through (base RTT 10 us).
var table1RTTs = [4]int64{10_000, 16_000, 25_000, 12_000}

// Table1 times one decision of the distilled trees (integer, rlcc.Controller.Decide), the
// policy MLP (rlccnet.NetController, through OnAck) and the paper's LSTM teacher (float64;
// lm, nil: seeded weights), interleaved: each of
// rounds rounds times a batch of each architecture in turn (the order rotating), so a
// load change on a shared host hits all three. A round's value is the fastest of
// table1Sub batches of about batch/table1Sub each (the least preempted, as the trees'
// BenchmarkDecision reports).
func Table1(m *rlcc.Model, mlp *rlccnet.MLP, lm *lstm.LSTM, rounds int, batch time.Duration) ([]Table1Arch, error) {
	if lm == nil {
		lm = lstm.NewLSTM(1)
	}
	net := config.Network{LinkRate: 100e9, BaseRTT: 10_000, MTU: 4096}
	cfg := rlcc.DefaultConfig()
	p, err := rlcc.NewParamsWithModel(cfg, net, m)
	if err != nil {
		return nil, err
	}
	np, err := rlccnet.NewNetParams(cfg, net, mlp)
	if err != nil {
		return nil, err
	}
	tree, nc, lf := rlcc.New(p), rlccnet.NewNet(np), lstm.NewLSTMFlow(lm, cfg, net)
	cost := tree.Cost()
	lc := lstm.LSTMCount()
	archs := []Table1Arch{
		{Name: "trees", Ops: p.DecisionOps(), Params: cost.GlobalBytes, State: cost.StateBytes},
		{Name: "MLP", MACs: lstm.MLPMACs(mlp), Ops: mlp.Flops(), Params: len(mlp.Theta), State: nc.Cost().StateBytes},
		{Name: "LSTM", MACs: lc.MACs, Ops: lc.Flops(), Params: lstm.LSTMParams, State: 8 * 2 * lstm.LSTMHid},
	}
	// The MLP controller decides in OnAck; each sample is of a packet sent after the
	// previous decision, so every call decides (its gate adds a compare).
	var now int64
	netDecide := func(rtt int64) {
		now += 1 << 20
		nc.OnAck(cc.Ack{Now: now, RTT: rtt, Bytes: 4096})
	}
	decide := []func(int64){tree.Decide, netDecide, lf.Decide}
	n := []int{1000, 1000, 1000}
	// Size each batch from a first timing.
	for i, d := range decide {
		ns := timeBatch(d, n[i])
		n[i] = max(50, int(float64(batch)/table1Sub/max(ns, 1)))
	}
	for r := range rounds {
		for k := range decide {
			i := (r + k) % len(decide)
			best := timeBatch(decide[i], n[i])
			for range table1Sub - 1 {
				best = min(best, timeBatch(decide[i], n[i]))
			}
			archs[i].Ns = append(archs[i].Ns, best)
		}
	}
	return archs, nil
}

// table1Sub is the number of batches per architecture and round.
const table1Sub = 10

// timeBatch returns the mean ns of n decisions.
func timeBatch(d func(int64), n int) float64 {
	start := time.Now()
	for i := range n {
		d(table1RTTs[i&3])
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n)
}

// Quantiles returns the minimum, median and maximum of v (v is not modified).
func Quantiles(v []float64) (lo, med, hi float64) {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return s[0], med, s[n-1]
}

// Ratios returns a[i]/b[i] per round.
func Ratios(a, b []float64) []float64 {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = a[i] / b[i]
	}
	return r
}
