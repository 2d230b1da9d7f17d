package train

import (
	"path/filepath"
	"slices"
	"testing"
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
