// Package ackpath holds the receiver's side of acknowledgement: which PSNs arrived (a
// sliding bitmap window), the SACK bitmaps built from it, and the ACK coalescing policy
// that decides when an ACK leaves and what it reports (CE count, clean EVs).
package ackpath

import (
	"math/bits"

	"github.com/smartt-transport/smartt/transport/wire"
)

// Mark results.
const (
	New       = iota // first arrival of this PSN
	Duplicate        // already received (below the cumulative point or its bit is set)
	Beyond           // beyond the receive window: not recorded
)

// Tracker records which PSNs arrived in the window [Cum, Cum+Size). Every PSN below Cum
// has arrived. It never allocates after NewTracker.
type Tracker struct {
	cum   uint32
	mask  uint32   // size-1, size a power of two >= 256
	bits  []uint64 // ring: PSN p lives at bit p&mask; bits of PSNs below cum are always 0
	above int      // bits set: PSNs beyond cum that arrived (0: in order, Sack has nothing to look up)
}

// NewTracker returns a tracker with a window of size PSNs (rounded up to a power of two,
// at least 256) starting at start.
func NewTracker(size int, start uint32) *Tracker {
	n := 256
	for n < size {
		n <<= 1
	}
	return &Tracker{cum: start, mask: uint32(n - 1), bits: make([]uint64, n/64)}
}

// Cum returns the cumulative PSN: every PSN before it has arrived.
func (t *Tracker) Cum() uint32 { return t.cum }

// Size returns the window size in PSNs.
func (t *Tracker) Size() int { return int(t.mask) + 1 }

func (t *Tracker) get(psn uint32) bool {
	i := psn & t.mask
	return t.bits[i>>6]&(1<<(i&63)) != 0
}

// Check classifies psn as Mark would (New, Duplicate or Beyond) without recording it, so
// that a receiver can refuse a packet (and leave it unacknowledged) after looking.
func (t *Tracker) Check(psn uint32) int {
	d := wire.SeqDiff(psn, t.cum)
	if d < 0 {
		return Duplicate
	}
	if uint32(d) > t.mask {
		return Beyond
	}
	if t.get(psn) {
		return Duplicate
	}
	return New
}

// Mark records the arrival of psn and advances the cumulative point past every PSN that
// has now arrived contiguously.
func (t *Tracker) Mark(psn uint32) int {
	d := wire.SeqDiff(psn, t.cum)
	if d == 0 && t.above == 0 {
		t.cum++ // in order with nothing beyond: no bit to set and clear again
		return New
	}
	if d < 0 {
		return Duplicate
	}
	if uint32(d) > t.mask {
		return Beyond
	}
	i := psn & t.mask
	w, b := i>>6, uint64(1)<<(i&63)
	if t.bits[w]&b != 0 {
		return Duplicate
	}
	t.bits[w] |= b
	t.above++
	if d == 0 {
		t.advance()
	}
	return New
}

// advance moves cum past the run of set bits that starts at cum, clearing them.
func (t *Tracker) advance() {
	for {
		i := t.cum & t.mask
		w := i >> 6
		run := t.bits[w] >> (i & 63)
		// Count the set bits from cum onward within this word.
		n := uint32(bits.TrailingZeros64(^run))
		if n == 0 {
			return
		}
		if max := 64 - (i & 63); n > max {
			n = max
		}
		var m uint64
		if n == 64 {
			m = ^uint64(0)
		} else {
			m = ((1 << n) - 1) << (i & 63)
		}
		t.bits[w] &^= m
		t.cum += n
		t.above -= int(n)
		if (i&63)+n < 64 {
			return
		}
	}
}

// AdvanceTo moves the cumulative point to psn if it is ahead (the sender reports that
// everything before psn is done), forgetting the bits it passes.
func (t *Tracker) AdvanceTo(psn uint32) {
	d := wire.SeqDiff(psn, t.cum)
	if d <= 0 {
		return
	}
	if uint32(d) > t.mask {
		clear(t.bits)
		t.cum, t.above = psn, 0
		return
	}
	for t.cum != psn {
		i := t.cum & t.mask
		if b := uint64(1) << (i & 63); t.bits[i>>6]&b != 0 {
			t.bits[i>>6] &^= b
			t.above--
		}
		t.cum++
	}
	t.advance()
}

// Sack fills out with words 64-bit words of arrival bits starting at base (bit i of word
// i/64 = PSN base+i arrived; PSNs below Cum count as arrived).
func (t *Tracker) Sack(base uint32, words int, out *[wire.MaxSackWords]uint64) {
	if t.above == 0 && base == t.cum {
		*out = [wire.MaxSackWords]uint64{} // in order: nothing from cum on has arrived
		return
	}
	for w := 0; w < words; w++ {
		out[w] = t.word(base + uint32(64*w))
	}
	for w := words; w < wire.MaxSackWords; w++ {
		out[w] = 0
	}
}

// word returns the 64 arrival bits of PSNs start..start+63.
func (t *Tracker) word(start uint32) uint64 {
	d := int64(wire.SeqDiff(start, t.cum))
	size := int64(t.mask) + 1
	if d <= -64 {
		return ^uint64(0)
	}
	if d >= size {
		return 0
	}
	i := start & t.mask
	w, s := i>>6, i&63
	v := t.bits[w] >> s
	if s != 0 {
		v |= t.bits[(w+1)&(uint32(len(t.bits))-1)] << (64 - s) // len(t.bits): a power of two
	}
	if d < 0 { // the first -d PSNs are below cum: arrived; their ring bits belong to others
		v |= (uint64(1) << uint(-d)) - 1
	}
	if d+64 > size { // PSNs from cum+size on are beyond the window
		v &= (uint64(1) << uint(size-d)) - 1
	}
	return v
}

// SackBase chooses where an ACK's bitmap of words 64-bit words should start so that it
// covers the triggering PSN: at Cum when that fits, else ending at trigger.
func (t *Tracker) SackBase(trigger uint32, words int) uint32 {
	width := uint32(64 * words)
	if wire.SeqDiff(trigger, t.cum) < int32(width) {
		return t.cum
	}
	return trigger + 1 - width
}

// Has reports whether psn has arrived (it is below Cum, or its bit in the window is set).
func (t *Tracker) Has(psn uint32) bool {
	d := wire.SeqDiff(psn, t.cum)
	if d < 0 {
		return true
	}
	return uint32(d) <= t.mask && t.get(psn)
}
