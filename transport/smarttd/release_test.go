package smarttd

import (
	"testing"
	"time"
)

// TestReleaserReturnsAfterMassRelease: memory is returned once what is held has fallen
// by releaseMin or more to at most half its high-water mark for two samples in a row, not
// for a smaller fall, a one-sample trough or within releaseGap of the last return.
func TestReleaserReturnsAfterMassRelease(t *testing.T) {
	var held int64
	frees := 0
	r := &releaser{held: func() int64 { return held }, free: func() { frees++ }}
	t0 := time.Unix(1000, 0)
	step := func(i int, h int64) bool { held = h; return r.sample(t0.Add(time.Duration(i) * time.Second)) }
	seq := []struct {
		held int64
		want bool
	}{
		{40 << 20, false}, // a flood's high-water mark
		{34 << 20, false}, // a fall of 6 MiB: under releaseMin
		{4 << 20, false},  // the connections expire: one sample down
		{40 << 20, false}, // a trough between bursts, not a release
		{4 << 20, false},
		{3 << 20, true},  // down for two samples: returned
		{2 << 20, false}, // nothing more to return
		{60 << 20, false},
		{1 << 20, false},
		{1 << 20, false}, // down again, but within releaseGap of the last return
	}
	for i, s := range seq {
		if got := step(i, s.held); got != s.want {
			t.Fatalf("sample %d (held %d MiB): returned %v, want %v", i, s.held>>20, got, s.want)
		}
	}
	if !step(int(releaseGap/time.Second)+6, 1<<20) || frees != 2 {
		t.Fatalf("after releaseGap: %d returns, want 2", frees)
	}
	if step(100, 1<<20) || step(101, 1<<20) || frees != 2 {
		t.Fatalf("held flat at its new mark: %d returns, want 2", frees)
	}
}
