package train

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/cc/rlcc"
	"github.com/smartt-transport/smartt/cc/rlcc/rlccnet"
)

func tinyConfig(dir string) Config {
	c := DefaultConfig()
	c.Iterations, c.MinFlows, c.MaxFlows, c.EpisodeNs, c.Rollout = 4, 2, 8, 1_000_000, 64
	c.Dir, c.CheckpointEvery, c.Horizon = dir, 2, 8
	return c
}

// TestTrainDeterministicAndResumable: a few training episodes from a seed give the same
// weights every run, change them (the policy learns something), and resuming from the
// mid-run checkpoint ends at the same weights as the uninterrupted run.
func TestTrainDeterministicAndResumable(t *testing.T) {
	dir := t.TempDir()
	run := func(c Config) *Trainer {
		tr, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Run(); err != nil {
			t.Fatal(err)
		}
		return tr
	}
	a := run(tinyConfig(dir))
	b := run(tinyConfig(t.TempDir()))
	init, _ := New(tinyConfig(""))
	if !slices.Equal(a.Net.Theta, b.Net.Theta) {
		t.Fatal("two runs from the same seed differ")
	}
	if slices.Equal(a.Net.Theta, init.Net.Theta) {
		t.Fatal("training did not change the weights")
	}
	ups := 0
	for _, e := range a.Curve {
		ups += e.Updates
	}
	if ups == 0 {
		t.Fatal("no gradient step was taken")
	}
	r, err := Resume(tinyConfig(t.TempDir()), filepath.Join(dir, "checkpoint_0002.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Iter != 2 {
		t.Fatalf("resumed at episode %d, want 2", r.Iter)
	}
	if err := r.Run(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Net.Theta, a.Net.Theta) {
		t.Fatal("resumed run ends at different weights")
	}
	other := tinyConfig(t.TempDir())
	other.Seed = 2
	if c := run(other); slices.Equal(c.Net.Theta, a.Net.Theta) {
		t.Fatal("another seed gave the same weights")
	}
	bad := tinyConfig(t.TempDir())
	bad.LR = 0.5 * bad.LR
	if _, err := Resume(bad, filepath.Join(dir, "checkpoint_0002.json")); err == nil {
		t.Fatal("resumed a checkpoint trained with another configuration")
	}
}

// TestDefaultModelIsDistilledFromDefaultPolicy: the embedded tree model is exactly what
// `smartt-lab rlcc distill` makes of the embedded trained policy (no hand-edited leaves), its
// held-out error is what its provenance says, and it fits the NIC's limits.
func TestDefaultModelIsDistilledFromDefaultPolicy(t *testing.T) {
	pj := rlccnet.DefaultPolicyJSON()
	net, _, err := rlccnet.ParseMLP(pj)
	if err != nil {
		t.Fatal(err)
	}
	m, rep, err := Distill(net, pj, DefaultDistillConfig())
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, rlcc.DefaultModelJSON()) {
		t.Fatal("cc/rlcc/default_model.json differs from smartt-lab rlcc distill of cc/rlcc/default_policy.json: run smartt-lab rlcc distill -policy cc/rlcc/default_policy.json -o cc/rlcc/default_model.json")
	}
	if err := m.Validate(rlcc.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	// The fit must explain most of the policy's action: held-out RMSE well below the
	// policy's mean |a - 1| on the same states.
	if rep.TestRMSE > 0.5*rep.TestMeanAbsInput {
		t.Fatalf("held-out RMSE %.4f against mean |a-1| %.4f", rep.TestRMSE, rep.TestMeanAbsInput)
	}
}

// TestConfigLimits: every training limit accepts its bound and refuses one step beyond,
// naming the field.
func TestConfigLimits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		at, out func(*Config)
	}{
		{"iterations", func(c *Config) { c.Iterations = 1 }, func(c *Config) { c.Iterations = 0 }},
		{"flows", func(c *Config) { c.MinFlows, c.MaxFlows = 1, 4096 }, func(c *Config) { c.MaxFlows = 4097 }},
		{"flows", func(c *Config) { c.MinFlows, c.MaxFlows = 8, 8 }, func(c *Config) { c.MinFlows, c.MaxFlows = 8, 7 }},
		{"episode", func(c *Config) { c.EpisodeNs = 100_000 }, func(c *Config) { c.EpisodeNs = 99_999 }},
		{"episode", func(c *Config) { c.EpisodeNs = 1_000_000_000 }, func(c *Config) { c.EpisodeNs = 1_000_000_001 }},
		{"rollout", func(c *Config) { c.Rollout = 1 << 20 }, func(c *Config) { c.Rollout = 1<<20 + 1 }},
		{"horizon", func(c *Config) { c.Horizon = 1000 }, func(c *Config) { c.Horizon = 1001 }},
		{"horizon", func(c *Config) { c.Horizon = 1 }, func(c *Config) { c.Horizon = 0 }},
		{"hidden", func(c *Config) { c.Hidden = []int{256, 1, 1, 1} }, func(c *Config) { c.Hidden = []int{257} }},
		{"hidden", func(c *Config) { c.Hidden = []int{1} }, func(c *Config) { c.Hidden = []int{1, 1, 1, 1, 1} }},
		{"lr", func(c *Config) { c.LR = 0.999 }, func(c *Config) { c.LR = 1 }},
		{"weight_clip", func(c *Config) { c.WeightClip = 1 }, func(c *Config) { c.WeightClip = 0.99 }},
	} {
		c := DefaultConfig()
		tc.at(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("%s at its limit: %v", tc.name, err)
		}
		tc.out(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s beyond its limit: %v", tc.name, err)
		}
	}
}
