package ackpath

import (
	"math/bits"
	"math/rand/v2"
	"testing"
)

// TestTrackerAboveCount: the count of PSNs beyond cum that Sack's in-order shortcut reads
// equals the bits set in the window after every Mark and AdvanceTo of a random walk
// (holes, duplicates, jumps within and beyond the window).
func TestTrackerAboveCount(t *testing.T) {
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 0xab0e))
		start := r.Uint32()
		tr := NewTracker(256, start)
		zeroSeen := 0
		for k := range 20000 {
			switch cum := tr.Cum(); r.IntN(20) {
			case 0:
				tr.AdvanceTo(cum + uint32(r.IntN(40))) // within the window
			case 1:
				if r.IntN(20) == 0 {
					tr.AdvanceTo(cum + 300 + uint32(r.IntN(500))) // beyond it: cleared whole
				}
			default:
				tr.Mark(cum - 8 + uint32(r.IntN(48)))
			}
			set := 0
			for _, w := range tr.bits {
				set += bits.OnesCount64(w)
			}
			if tr.above != set {
				t.Fatalf("seed %d step %d: above %d, bits set %d", seed, k, tr.above, set)
			}
			if set == 0 {
				zeroSeen++
			}
		}
		if zeroSeen == 0 || zeroSeen == 20000 {
			t.Fatalf("seed %d: the walk never (or always) had an empty window: %d", seed, zeroSeen)
		}
	}
}
