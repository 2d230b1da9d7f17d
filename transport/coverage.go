package transport

// Exact coverage of a message's bytes. A message is complete when every byte of it has
// arrived, not when the payload bytes received add up to its length: a retransmission
// under a fresh PSN whose original also arrives (spurious under spraying), or a forged
// packet overlapping another, would otherwise count twice and complete a message with a
// hole in it. Coverage also makes clearing recycled buffers unnecessary: every byte
// delivered was written by the message's own packets.

// span is a received byte range [lo, hi) of a message (messages are < 4 GiB).
type span struct{ lo, hi uint32 }

// maxSpans bounds the disjoint ranges one message may hold: an honest sender's holes
// are bounded by its packets in flight, and a packet that fills or extends a range never
// needs a new one, so refusing one that would is safe (it is resent) and bounds the work
// per packet (a memmove of at most 8 KiB).
const maxSpans = 1024

// Outcomes of rxMsg.cover.
const (
	coverNew     = iota // new bytes: write them
	coverDup            // exactly bytes already held: a duplicate
	coverOverlap        // partly overlaps held bytes: no honest sender does that
	coverFull           // would need more than maxSpans ranges
)

// cover classifies [off, off+n) against what r holds and returns where a new range goes.
func (r *rxMsg) cover(off, n int) (int, int) {
	lo, hi := uint32(off), uint32(off+n)
	s := r.spans
	k := len(s)
	// Most packets arrive at or after the last range (in order or nearly so).
	i := k
	if k > 0 && lo < s[k-1].hi {
		// Binary search: the first range ending after lo.
		a, b := 0, k
		for a < b {
			m := int(uint(a+b) >> 1)
			if s[m].hi <= lo {
				a = m + 1
			} else {
				b = m
			}
		}
		i = a
	}
	if i < k && s[i].lo < hi {
		if s[i].lo <= lo && hi <= s[i].hi {
			return i, coverDup
		}
		return i, coverOverlap
	}
	joinsPrev := i > 0 && s[i-1].hi == lo
	joinsNext := i < k && s[i].lo == hi
	if !joinsPrev && !joinsNext && k >= maxSpans {
		return i, coverFull
	}
	return i, coverNew
}

// addSpan records [off, off+n) as received at position i (from cover), merging it with
// the ranges it touches.
func (r *rxMsg) addSpan(i, off, n int) {
	lo, hi := uint32(off), uint32(off+n)
	s := r.spans
	joinsPrev := i > 0 && s[i-1].hi == lo
	joinsNext := i < len(s) && s[i].lo == hi
	switch {
	case joinsPrev && joinsNext:
		s[i-1].hi = s[i].hi
		r.spans = append(s[:i], s[i+1:]...)
	case joinsPrev:
		s[i-1].hi = hi
	case joinsNext:
		s[i].lo = lo
	default:
		s = append(s, span{})
		copy(s[i+1:], s[i:])
		s[i] = span{lo, hi}
		r.spans = s
	}
	r.got += n
}
