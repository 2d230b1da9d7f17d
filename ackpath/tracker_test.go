package ackpath_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/smartt-transport/smartt/ackpath"
	"github.com/smartt-transport/smartt/transport/wire"
)

// Start PSNs: zero, arbitrary, and near the 2^32 wrap at ring index 0 and mid-ring.
var starts = []uint32{0, 123457, 0xffffff00, 0xffffffc8, 0xffffffff}

// ref is the reference model of a Tracker: a set of received PSNs at or above cum.
type ref struct {
	cum  uint32
	size uint32
	got  map[uint32]bool
}

func newRef(size int, start uint32) *ref {
	return &ref{cum: start, size: uint32(size), got: make(map[uint32]bool)}
}

func (r *ref) mark(psn uint32) int {
	d := int32(psn - r.cum)
	switch {
	case d < 0 || r.got[psn]:
		return ackpath.Duplicate
	case uint32(d) >= r.size:
		return ackpath.Beyond
	}
	r.got[psn] = true
	r.settle()
	return ackpath.New
}

func (r *ref) settle() {
	for r.got[r.cum] {
		delete(r.got, r.cum)
		r.cum++
	}
}

func (r *ref) advanceTo(psn uint32) {
	if int32(psn-r.cum) <= 0 {
		return
	}
	for p := range r.got {
		if int32(p-psn) < 0 {
			delete(r.got, p)
		}
	}
	r.cum = psn
	r.settle()
}

func (r *ref) arrived(psn uint32) bool { return int32(psn-r.cum) < 0 || r.got[psn] }

func (r *ref) sack(base uint32, words int) (out [wire.MaxSackWords]uint64) {
	for i := range 64 * words {
		if r.arrived(base + uint32(i)) {
			out[i/64] |= 1 << (i % 64)
		}
	}
	return out
}

func mustMark(t *testing.T, tr *ackpath.Tracker, psn uint32, want int) {
	t.Helper()
	if got := tr.Mark(psn); got != want {
		t.Fatalf("Mark(%#x) = %s, want %s (Cum %#x)", psn, result(got), result(want), tr.Cum())
	}
}

func result(r int) string {
	switch r {
	case ackpath.New:
		return "New"
	case ackpath.Duplicate:
		return "Duplicate"
	case ackpath.Beyond:
		return "Beyond"
	}
	return fmt.Sprintf("result(%d)", r)
}

func wantCum(t *testing.T, tr *ackpath.Tracker, want uint32) {
	t.Helper()
	if got := tr.Cum(); got != want {
		t.Fatalf("Cum = %#x, want %#x", got, want)
	}
}

// TestNewTrackerSize checks the window is a power of two of at least 256 PSNs.
func TestNewTrackerSize(t *testing.T) {
	for _, tt := range []struct{ in, want int }{{0, 256}, {1, 256}, {256, 256}, {257, 512}, {4096, 4096}, {5000, 8192}} {
		tr := ackpath.NewTracker(tt.in, 7)
		if tr.Size() != tt.want || tr.Cum() != 7 {
			t.Errorf("NewTracker(%d, 7): Size %d Cum %d, want %d 7", tt.in, tr.Size(), tr.Cum(), tt.want)
		}
	}
}

// TestTrackerInOrder checks that in-order arrivals advance Cum one by one.
func TestTrackerInOrder(t *testing.T) {
	for _, s := range starts {
		t.Run(fmt.Sprintf("start=%#x", s), func(t *testing.T) {
			tr := ackpath.NewTracker(256, s)
			for i := range uint32(1000) {
				mustMark(t, tr, s+i, ackpath.New)
				wantCum(t, tr, s+i+1)
			}
		})
	}
}

// TestTrackerHoleFill marks everything but the first PSN of a run, then fills the hole:
// Cum jumps across word boundaries, the ring wrap and the 2^32 wrap.
func TestTrackerHoleFill(t *testing.T) {
	for _, s := range starts {
		for _, n := range []uint32{2, 63, 64, 65, 129, 200, 255, 256} {
			t.Run(fmt.Sprintf("start=%#x/n=%d", s, n), func(t *testing.T) {
				tr := ackpath.NewTracker(256, s)
				for i := n - 1; i >= 1; i-- { // descending: every mark lands out of order
					mustMark(t, tr, s+i, ackpath.New)
					wantCum(t, tr, s)
				}
				mustMark(t, tr, s, ackpath.New)
				wantCum(t, tr, s+n)
				// Bits of the run must be gone: the next window is clean.
				var out [wire.MaxSackWords]uint64
				tr.Sack(tr.Cum(), 4, &out)
				if out != ([wire.MaxSackWords]uint64{}) {
					t.Fatalf("Sack after the jump = %x, want empty", out)
				}
			})
		}
	}
}

// TestTrackerInterleaved marks odd PSNs, then even ones: Cum advances by two each time.
func TestTrackerInterleaved(t *testing.T) {
	for _, s := range starts {
		tr := ackpath.NewTracker(256, s)
		for round := range uint32(4) { // four windows' worth: the ring wraps repeatedly
			base := s + 200*round
			for i := uint32(1); i < 200; i += 2 {
				mustMark(t, tr, base+i, ackpath.New)
			}
			wantCum(t, tr, base)
			for i := uint32(0); i < 200; i += 2 {
				mustMark(t, tr, base+i, ackpath.New)
				wantCum(t, tr, base+i+2)
			}
		}
	}
}

// TestTrackerDuplicateBeyond checks duplicate and out-of-window classification.
func TestTrackerDuplicateBeyond(t *testing.T) {
	for _, s := range starts {
		t.Run(fmt.Sprintf("start=%#x", s), func(t *testing.T) {
			tr := ackpath.NewTracker(256, s)
			for i := range uint32(10) {
				mustMark(t, tr, s+i, ackpath.New)
			}
			cum := s + 10
			mustMark(t, tr, s+20, ackpath.New)
			// Below Cum.
			for _, p := range []uint32{cum - 1, s, s - 1, s - 1000, cum - 1<<31 + 1} {
				mustMark(t, tr, p, ackpath.Duplicate)
			}
			// Within the window, already set.
			mustMark(t, tr, s+20, ackpath.Duplicate)
			// Beyond the window: not recorded.
			for _, p := range []uint32{cum + 256, cum + 257, cum + 10000, cum + 1<<31 - 1} {
				mustMark(t, tr, p, ackpath.Beyond)
			}
			mustMark(t, tr, cum+255, ackpath.New) // the last PSN inside the window
			wantCum(t, tr, cum)
			var out [wire.MaxSackWords]uint64
			tr.Sack(cum, 4, &out)
			want := [wire.MaxSackWords]uint64{1 << 10, 0, 0, 1 << 63}
			if out != want {
				t.Fatalf("Sack = %x, want %x", out, want)
			}
			// Once the window moves, the formerly beyond PSN is new.
			tr.AdvanceTo(cum + 100)
			mustMark(t, tr, cum+256, ackpath.New)
		})
	}
}

// TestTrackerAdvanceTo checks forward jumps (small, past marks, larger than the window)
// and that backward or zero moves do nothing.
func TestTrackerAdvanceTo(t *testing.T) {
	for _, s := range starts {
		t.Run(fmt.Sprintf("start=%#x", s), func(t *testing.T) {
			tr := ackpath.NewTracker(256, s)
			for _, i := range []uint32{5, 6, 10, 255} {
				mustMark(t, tr, s+i, ackpath.New)
			}
			tr.AdvanceTo(s + 3)
			wantCum(t, tr, s+3)
			tr.AdvanceTo(s + 2) // backwards: no-op
			wantCum(t, tr, s+3)
			tr.AdvanceTo(s + 3 - 1<<30)
			wantCum(t, tr, s+3)
			tr.AdvanceTo(s + 3)
			wantCum(t, tr, s+3)
			tr.AdvanceTo(s + 5) // lands on received PSNs: Cum moves past them
			wantCum(t, tr, s+7)
			mustMark(t, tr, s+10, ackpath.Duplicate)
			tr.AdvanceTo(s + 255) // to the top of the old window, which had arrived
			wantCum(t, tr, s+256)

			// A jump larger than the window forgets everything.
			for i := uint32(1); i < 256; i += 3 {
				mustMark(t, tr, s+256+i, ackpath.New)
			}
			far := s + 256 + 256 + 1000
			tr.AdvanceTo(far)
			wantCum(t, tr, far)
			var out [wire.MaxSackWords]uint64
			tr.Sack(far, 4, &out)
			if out != ([wire.MaxSackWords]uint64{}) {
				t.Fatalf("Sack after a far jump = %x, want empty", out)
			}
			for i := uint32(255); i >= 1; i-- { // descending: Cum stays until the first arrives
				mustMark(t, tr, far+i, ackpath.New)
				wantCum(t, tr, far)
			}
			mustMark(t, tr, far, ackpath.New)
			wantCum(t, tr, far+256)

			// Exactly one window ahead.
			tr.AdvanceTo(far + 256 + 256)
			wantCum(t, tr, far+512)
			mustMark(t, tr, far+512, ackpath.New)
			wantCum(t, tr, far+513)
		})
	}
}

// TestSackBase checks where the bitmap starts for a triggering PSN.
func TestSackBase(t *testing.T) {
	for _, s := range starts {
		tr := ackpath.NewTracker(1024, s)
		for words := 1; words <= wire.MaxSackWords; words++ {
			w := uint32(64 * words)
			for _, tt := range []struct{ trigger, want uint32 }{
				{s, s},
				{s - 5, s}, // already below Cum (a duplicate)
				{s + w - 1, s},
				{s + w, s + 1},
				{s + w + 100, s + 101},
				{s + 1000, s + 1001 - w},
			} {
				if got := tr.SackBase(tt.trigger, words); got != tt.want {
					t.Errorf("start %#x, %d words: SackBase(%#x) = %#x, want %#x", s, words, tt.trigger, got, tt.want)
				}
			}
		}
	}
}

// TestSackReference compares Sack (and Has) with the reference model over random arrival
// orders, window sizes and bitmap bases.
func TestSackReference(t *testing.T) {
	seeds := uint64(200)
	if testing.Short() {
		seeds = 50
	}
	for seed := range seeds {
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		size := 256 << r.IntN(3)
		start := starts[r.IntN(len(starts))] - uint32(r.IntN(300))
		tr, m := ackpath.NewTracker(size, start), newRef(size, start)

		// A random permutation of 1.5 windows, with some duplicates and occasional
		// sender-side advances mixed in.
		n := size * 3 / 2
		order := r.Perm(n)
		for k, i := range order {
			psn := start + uint32(i)
			peek := tr.Check(psn)
			if got, want := tr.Mark(psn), m.mark(psn); got != want || peek != want {
				if peek != want {
					t.Fatalf("seed %d: Check(%#x) = %s, want %s", seed, psn, result(peek), result(want))
				}
				t.Fatalf("seed %d: Mark(%#x) = %s, want %s", seed, psn, result(got), result(want))
			}
			if r.IntN(8) == 0 {
				p := start + uint32(order[r.IntN(k+1)])
				if got, want := tr.Mark(p), m.mark(p); got != want {
					t.Fatalf("seed %d: repeated Mark(%#x) = %s, want %s", seed, p, result(got), result(want))
				}
			}
			if r.IntN(100) == 0 {
				p := m.cum + uint32(r.IntN(size/4))
				tr.AdvanceTo(p)
				m.advanceTo(p)
			}
			if tr.Cum() != m.cum {
				t.Fatalf("seed %d: Cum = %#x, reference %#x", seed, tr.Cum(), m.cum)
			}
			if k%7 == 0 {
				checkSack(t, seed, r, tr, m)
			}
			if k%50 == 0 {
				checkHas(t, seed, tr, m)
			}
		}
		checkSack(t, seed, r, tr, m)
		checkHas(t, seed, tr, m)
	}
}

// checkHas compares Has with the reference from below Cum to beyond the window.
func checkHas(t *testing.T, seed uint64, tr *ackpath.Tracker, m *ref) {
	t.Helper()
	for i := -70; i < tr.Size()+70; i++ {
		psn := m.cum + uint32(i)
		if got, want := tr.Has(psn), m.arrived(psn); got != want {
			t.Fatalf("seed %d: Cum %#x: Has(%#x) = %v, reference %v", seed, m.cum, psn, got, want)
		}
	}
}

func checkSack(t *testing.T, seed uint64, r *rand.Rand, tr *ackpath.Tracker, m *ref) {
	t.Helper()
	words := 1 + r.IntN(wire.MaxSackWords)
	size := tr.Size()
	bases := []uint32{
		m.cum,
		m.cum + 1 + uint32(r.IntN(size)),          // above Cum, possibly past the window's end
		m.cum - 1 - uint32(r.IntN(64)),            // straddling Cum
		m.cum - 64 - uint32(r.IntN(100)),          // entirely below Cum
		m.cum + uint32(size) - uint32(r.IntN(64)), // straddling the window's end
		tr.SackBase(m.cum+uint32(r.IntN(size)), words),
	}
	for _, base := range bases {
		out := [wire.MaxSackWords]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
		tr.Sack(base, words, &out)
		if want := m.sack(base, words); out != want {
			t.Fatalf("seed %d: Cum %#x size %d: Sack(%#x, %d) = %x, reference %x",
				seed, m.cum, size, base, words, out, want)
		}
	}
}

// TestTrackerProperty marks random PSNs around the window (below Cum, inside, beyond):
// every result matches the reference, and Cum is always its first missing PSN.
func TestTrackerProperty(t *testing.T) {
	for seed := range uint64(100) {
		r := rand.New(rand.NewPCG(seed, 0xc0ffee))
		start := r.Uint32()
		if seed%2 == 0 {
			start = 0xffffffff - uint32(r.IntN(2000)) // cross the 2^32 wrap
		}
		const size = 256
		tr, m := ackpath.NewTracker(size, start), newRef(size, start)
		for range 20000 {
			psn := m.cum - 32 + uint32(r.IntN(size+64))
			if r.IntN(2) == 0 {
				psn = m.cum + uint32(r.IntN(8)) // near Cum, so that it keeps moving
			}
			peek := tr.Check(psn)
			if got, want := tr.Mark(psn), m.mark(psn); got != want || peek != want {
				if peek != want {
					t.Fatalf("seed %d: Check(%#x) = %s, want %s", seed, psn, result(peek), result(want))
				}
				t.Fatalf("seed %d: Mark(%#x) = %s, want %s", seed, psn, result(got), result(want))
			}
			if tr.Cum() != m.cum {
				t.Fatalf("seed %d: Cum = %#x, first missing PSN %#x", seed, tr.Cum(), m.cum)
			}
		}
		if int32(tr.Cum()-start) < 4*size { // the walk must have crossed several windows
			t.Fatalf("seed %d: Cum advanced only %d", seed, int32(tr.Cum()-start))
		}
	}
}

// TestTrackerNoAllocs checks that Mark, AdvanceTo and Sack never allocate.
func TestTrackerNoAllocs(t *testing.T) {
	tr := ackpath.NewTracker(4096, 0xfffffff0)
	var out [wire.MaxSackWords]uint64
	psn := uint32(0xfffffff0)
	a := testing.AllocsPerRun(1000, func() {
		tr.Mark(psn + 1)
		tr.Mark(psn)
		tr.Sack(tr.SackBase(psn+1, 4), 4, &out)
		tr.AdvanceTo(psn + 3)
		psn += 3
	})
	if a != 0 {
		t.Fatalf("%v allocations per run, want 0", a)
	}
}

var sinkInt int

// BenchmarkTrackerMark marks PSNs in pairs swapped (every other one out of order).
func BenchmarkTrackerMark(b *testing.B) {
	tr := ackpath.NewTracker(4096, 0)
	b.ReportAllocs()
	psn := uint32(0)
	for b.Loop() {
		sinkInt = tr.Mark(psn ^ 1)
		psn++
	}
}

// BenchmarkTrackerSack builds a 256-bit SACK bitmap at an unaligned base over a window
// with holes.
func BenchmarkTrackerSack(b *testing.B) {
	tr := ackpath.NewTracker(4096, 0xffffff00)
	r := rand.New(rand.NewPCG(1, 1))
	for i := range uint32(512) {
		if r.IntN(4) != 0 {
			tr.Mark(0xffffff01 + i)
		}
	}
	var out [wire.MaxSackWords]uint64
	base := tr.Cum() + 37
	b.ReportAllocs()
	for b.Loop() {
		tr.Sack(base, wire.MaxSackWords, &out)
	}
}
