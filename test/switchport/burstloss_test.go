package switchport

import "testing"

// TestBurstLoss: the zero value and a stopped process lose nothing; a started one loses
// about burst/(gap+burst) of the time, only from its start on, and the same seed gives
// the same bursts.
func TestBurstLoss(t *testing.T) {
	var z BurstLoss
	if z.Lost(0) || z.Lost(1e12) {
		t.Fatal("the zero value lost")
	}
	run := func(seed uint64) (lost int, first int64) {
		var b BurstLoss
		b.Start(1e9, 9_000, 1_000, seed)
		first = -1
		for at := int64(1e9); at < 1e9+100_000_000; at += 100 {
			if b.Lost(at) {
				lost++
				if first < 0 {
					first = at
				}
			}
		}
		return lost, first
	}
	lost, first := run(7)
	if f := float64(lost) / 1e6; f < 0.09 || f > 0.11 {
		t.Errorf("lost fraction %.4f, want 0.10", f)
	}
	if first <= 1e9 {
		t.Errorf("first loss at %d, want after the start (a gap comes first)", first)
	}
	if l2, f2 := run(7); l2 != lost || f2 != first {
		t.Error("same seed, different bursts")
	}
	if l3, _ := run(8); l3 == lost {
		t.Error("another seed gave the very same loss count")
	}
	var b BurstLoss
	b.Start(0, 1_000, 1_000, 1)
	b.Stop()
	for at := int64(0); at < 100_000; at += 10 {
		if b.Lost(at) {
			t.Fatal("a stopped process lost")
		}
	}
}
