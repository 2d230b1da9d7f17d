package reps

import (
	"math/rand/v2"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/hwprofile"
)

// Bitmap balancer constants: paths tracked per connection and the penalties.
const (
	bitmapPaths      = 256 // a power of two; a smaller EVS tracks fewer
	bitmapMaxPenalty = 15  // 4 bits per path
	bitmapPenaltyCE  = 1
	bitmapPenaltyNak = 4 // a trimmed or SACK-gap loss
)

// Bitmap is the REPS paper's "BitMap" baseline (Sec. 4.1: "a bitmap approach where we
// keep per EV statistics similarly to STrack", Le et al., arXiv:2407.15266): a penalty per
// path, and packets sprayed round robin over the connection's paths in an order permuted
// afresh every cycle, skipping penalised paths. An ECN-marked ACK adds 1 to its EV's
// penalty, a trimmed or SACK-gap loss 4, a timeout the maximum 15; the first penalised
// path the rotation meets on a packet's turn loses one point, so a path is skipped
// about as many times as it was penalised. The paths are min(EVS, 256) rounded down to a
// power of two, consecutive EVs from a random offset. Packed state: 4-bit penalties
// (128 bytes for 256 paths), path count, offset, rotation index and permutation mask (2
// each) = 136 bytes.
type Bitmap struct {
	pen       [bitmapPaths / 2]uint8 // two 4-bit penalties per byte
	paths     uint16
	cur, mask uint16
	off       uint16
	evs       int
	rng       *rand.Rand
}

// NewBitmap returns the BitMap balancer on env's EV space.
func NewBitmap(env Env, rng *rand.Rand) *Bitmap {
	b := &Bitmap{evs: env.evs(), rng: rng, paths: 1}
	for int(b.paths)*2 <= min(b.evs, bitmapPaths) {
		b.paths *= 2
	}
	b.off = randomEV(rng, b.evs)
	b.mask = uint16(rng.IntN(int(b.paths)))
	return b
}

func (b *Bitmap) penalty(i uint16) uint8 { return b.pen[i>>1] >> (4 * (i & 1)) & 0xf }

func (b *Bitmap) setPenalty(i uint16, v uint8) {
	s := 4 * (i & 1)
	b.pen[i>>1] = b.pen[i>>1]&^(0xf<<s) | v<<s
}

// index maps an EV back to its path, or reports that it is none of this connection's.
func (b *Bitmap) index(ev uint16) (uint16, bool) {
	i := (int(ev) - int(b.off) + b.evs) % b.evs
	return uint16(i), i < int(b.paths)
}

// advance moves the rotation on, drawing a new permutation when a cycle ends.
func (b *Bitmap) advance() {
	b.cur++
	if b.cur == b.paths {
		b.cur = 0
		b.mask = uint16(b.rng.IntN(int(b.paths)))
	}
}

// NextEV returns the next unpenalised path of the rotation (the last one looked at when
// every path is penalised).
func (b *Bitmap) NextEV(int64, int, bool) uint16 {
	var i uint16
	decayed := false
	for range b.paths {
		i = b.cur ^ b.mask
		b.advance()
		p := b.penalty(i)
		if p == 0 {
			break
		}
		if !decayed {
			b.setPenalty(i, p-1)
			decayed = true
		}
	}
	return uint16((int(b.off) + int(i)) % b.evs)
}

func (b *Bitmap) punish(ev uint16, by uint8) {
	i, ok := b.index(ev)
	if !ok {
		return
	}
	b.setPenalty(i, min(b.penalty(i)+by, bitmapMaxPenalty))
}

// OnAck penalises the EV of a marked ACK.
func (b *Bitmap) OnAck(_ int64, ev uint16, ce bool, _ int64) {
	if ce {
		b.punish(ev, bitmapPenaltyCE)
	}
}

// OnLoss penalises the lost packet's EV: the maximum after a timeout.
func (b *Bitmap) OnLoss(_ int64, ev uint16, cause cc.LossCause) {
	if cause == cc.LossTimeout {
		b.punish(ev, bitmapMaxPenalty)
		return
	}
	b.punish(ev, bitmapPenaltyNak)
}

// Cost reports the BitMap balancer's packed state: 4 bits per path and 8 bytes.
func (b *Bitmap) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "bitmap", StateBytes: int(b.paths+1)/2 + 8, GlobalBytes: 8, Ops: 12, IntegerOnly: true}
}
