package train

import (
	"testing"

	"github.com/smartt-transport/smartt/cc/rlcc/lstm"
)

func tinyLSTMConfig() LSTMConfig {
	c := DefaultLSTMConfig()
	c.Iterations, c.MinFlows, c.MaxFlows, c.EpisodeNs, c.Rollout, c.Horizon = 4, 2, 8, 500_000, 64, 8
	c.AllToAllEvery, c.MaxAllToAll = 4, 2 // the fourth episode: 128 flows on the tree
	return c
}

// TestLSTMTrainDeterministic: the LSTM teacher's training from a seed gives the same
// weights every run, takes gradient steps that change them, runs its all-to-all
// episode, and another seed gives other weights.
func TestLSTMTrainDeterministic(t *testing.T) {
	run := func(c LSTMConfig) *LSTMTrainer {
		tr, err := NewLSTMTrainer(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Run(); err != nil {
			t.Fatal(err)
		}
		return tr
	}
	a, b := run(tinyLSTMConfig()), run(tinyLSTMConfig())
	if a.Net.Theta != b.Net.Theta {
		t.Fatal("two runs from the same seed differ")
	}
	if a.Net.Theta == lstm.NewLSTM(a.Cfg.Seed).Theta {
		t.Fatal("training did not change the weights")
	}
	ups, a2a := 0, 0
	for _, e := range a.Curve {
		ups += e.Updates
		if e.AllToAll {
			a2a++
			if e.Flows != 2*PaperTree.Hosts || e.Decisions == 0 {
				t.Fatalf("all-to-all episode: %d flows, %d decisions", e.Flows, e.Decisions)
			}
		}
	}
	if ups == 0 || a2a != 1 {
		t.Fatalf("%d gradient steps, %d all-to-all episodes: want > 0 and 1", ups, a2a)
	}
	c := tinyLSTMConfig()
	c.Seed = 2
	if run(c).Net.Theta == a.Net.Theta {
		t.Fatal("seeds 1 and 2 trained the same weights")
	}
	bad := tinyLSTMConfig()
	bad.BPTT = lstm.MaxBPTT + 1
	if _, err := NewLSTMTrainer(bad); err == nil {
		t.Fatal("bptt beyond MaxBPTT accepted")
	}
}

// TestLSTMDecisionWindowReplays: every decision's window (the recurrent state before it
// and the last BPTT inputs) replays to the decision's own output, so the gradient is
// taken at the state the flow acted in.
func TestLSTMDecisionWindowReplays(t *testing.T) {
	env := DefaultEnv()
	net := lstm.NewLSTM(7)
	var sc lstm.Grad
	g := make([]float64, lstm.LSTMParams)
	n, full := 0, 0
	pol := &LSTMPolicy{Net: net, BPTT: 3, Cfg: env, OnDecision: func(_ *lstm.Controller, d *lstm.Decision) {
		n++
		if d.N == 3 {
			full++
		}
		if d.N < 1 || d.N > 3 {
			t.Fatalf("window of %d decisions, bptt 3", d.N)
		}
		if y := net.AccumGrad(&sc, &d.Start, d.Win[:d.N], 0, g); y != d.U {
			t.Fatalf("decision %d: window replays to %v, decided %v", n, y, d.U)
		}
	}}
	if _, err := env.Run(pol, 4, 1, 200_000, 200_000); err != nil {
		t.Fatal(err)
	}
	if n < 20 || full == 0 {
		t.Fatalf("%d decisions, %d with a full window", n, full)
	}
}
