package sim

import (
	"math/rand/v2"
	"testing"
)

// TestEventQueueOrder checks the wheel-plus-heap queue against a plain heap of the same
// keys: pops must come out in exactly the same order, with events near, far (beyond the
// wheel), in the past, at equal times and across a wrap of the sequence number.
func TestEventQueueOrder(t *testing.T) {
	for _, start := range []uint64{0, 1<<seqBits - 500} {
		var q eventQueue
		var ref heap4
		q.seq, ref.h = start, nil
		rseq := start
		rng := rand.New(rand.NewPCG(3, start))
		now := int64(0)
		push := func(at int64, v uint64) {
			q.push(at, v)
			rseq++
			ref.push(event{key: uint64(at)<<seqBits | rseq&(1<<seqBits-1), val: v})
		}
		for i := range 200 {
			push(rng.Int64N(50), uint64(i))
		}
		var v uint64 = 1000
		for n := 0; n < 200_000 && len(ref.h) > 0; n++ {
			if q.len() != len(ref.h) {
				t.Fatalf("len %d, want %d", q.len(), len(ref.h))
			}
			// Not yet due: stays.
			if e, ok := q.popUntil(ref.h[0].at() - 1); ok {
				t.Fatalf("pop %d: popUntil(%d) took an event at %d", n, ref.h[0].at()-1, e.at())
			}
			got, want := q.pop(), ref.pop()
			if got != want {
				t.Fatalf("pop %d: got (t=%d, v=%d), want (t=%d, v=%d)", n, got.at(), got.val, want.at(), want.val)
			}
			now = got.at()
			for range rng.IntN(3) {
				v++
				switch r := rng.IntN(100); {
				case r < 70:
					push(now+rng.Int64N(4), v) // same and next few nanoseconds: long buckets
				case r < 90:
					push(now+rng.Int64N(3*wheelLen/2), v) // some beyond the wheel
				case r < 95:
					push(max(0, now-rng.Int64N(10)), v) // in the past
				default:
					push(now+wheelLen-1+rng.Int64N(3), v) // at the wheel's edge
				}
			}
		}
		if q.len() != len(ref.h) {
			t.Fatalf("len %d, want %d", q.len(), len(ref.h))
		}
	}
}
