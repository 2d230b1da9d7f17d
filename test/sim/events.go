package sim

import "math/bits"

// The event core: a timing wheel of one-nanosecond buckets for the events of the next
// few microseconds (nearly all of them: a hop is a link's latency ahead) and a 4-ary
// min-heap for the rest (timers, flow starts), both holding small, pointer-free events
// keyed by (time, sequence number). The sequence number makes the order of simultaneous
// events the order they were scheduled in, so a run is a pure function of its inputs and
// seed. A bucket holds the events of one nanosecond in key order (pushes append, so
// that is push order but across a wrap of the sequence number), and pop takes the
// smaller key of the wheel's first event and the heap's top: the order is exactly the
// key order a single heap gives. Nothing is allocated once the pools have reached their
// working size, and the garbage collector never scans them.

// evKind says what an event does.
type evKind uint8

const (
	evPipe   evKind = iota + 1 // the packet at the head of link pipe id reaches the far end
	evWake                     // output port id may start its next packet
	evNIC                      // host id's NIC finished serialising a packet
	evTimer                    // host id's engine timer (arg: generation)
	evStart                    // flow id starts
	evFault                    // failure action id
	evSample                   // queue sampling tick
	evRoute                    // routing converges (recompute the usable next hops)
	evUser                     // benchmarks and tests
)

// Event entries are 16 bytes, so a 4-ary node's children share two cache lines:
// key = time << seqBits | sequence number (mod 2^seqBits), one integer comparison;
// val = kind | id | arg.
const (
	seqBits = 22
	maxAt   = 1<<(64-seqBits) - 1 // ~73 minutes of virtual time
	idBits  = 30
	idMask  = 1<<idBits - 1
)

// event is one scheduled action.
type event struct {
	key uint64
	val uint64
}

func (e event) at() int64    { return int64(e.key >> seqBits) }
func (e event) kind() evKind { return evKind(e.val >> (2 * idBits)) }
func (e event) id() int32    { return int32(e.val >> idBits & idMask) }
func (e event) arg() int32   { return int32(e.val & idMask) }
func mkVal(k evKind, id, arg int32) uint64 {
	return uint64(k)<<(2*idBits) | uint64(uint32(id)&idMask)<<idBits | uint64(uint32(arg)&idMask)
}

// wheelBits sets the wheel's span: 2^14 ns = 16 us, several full queues' drain time at
// 800 Gbit/s; events further ahead go to the heap.
const (
	wheelBits = 14
	wheelLen  = 1 << wheelBits
	wheelMask = wheelLen - 1
)

// blkLen is the number of events in a wheel block (256 bytes: four cache lines). A
// bucket is a list of blocks, so its events lie side by side: at thousands of hosts a
// nanosecond holds hundreds of events, and walking them (pop, the lookahead cursor) and
// appending to them (push) touch consecutive lines instead of one scattered node each.
const blkLen = 16

// bucket is the list of events of one nanosecond: blocks head..tail (linked by
// blkNext), the first event at head[lo], the next free slot at tail[hi].
type bucket struct{ head, tail, lo, hi int32 }

// eventQueue is the wheel plus the heap.
type eventQueue struct {
	far     heap4
	seq     uint64
	cur     int64 // no wheel event is before cur; the wheel covers [cur, cur+wheelLen)
	n       int   // events in the wheel
	bk      []bucket
	used    []uint64 // bit per bucket: not empty
	blks    [][blkLen]event
	blkNext []int32 // next block of a bucket's list, or of the free list (-1: none)
	free    int32   // free list of blocks (LIFO: the block reused is the one just freed)
	// Lookahead for prefetching: a cursor about pfDist pops ahead (at slot pfIdx of block
	// pfBlk, whose key was pfKey, pfAhead pops ahead), and the events it stood on at its
	// last moves (pfHist[pfN&7] the newest).
	pfBlk   int32
	pfIdx   int32
	pfKey   uint64
	pfAhead int
	pfHist  [8]event
	pfN     uint32
}

// pfDist is how far the lookahead cursor runs ahead of pop, in events.
const pfDist = 9

func (q *eventQueue) len() int { return q.n + len(q.far.h) }

// newBlk takes a block off the free list (or makes one).
func (q *eventQueue) newBlk() int32 {
	nb := q.free
	if nb < 0 {
		nb = int32(len(q.blks))
		q.blks = append(q.blks, [blkLen]event{})
		q.blkNext = append(q.blkNext, -1)
		return nb
	}
	q.free = q.blkNext[nb]
	q.blkNext[nb] = -1
	return nb
}

// freeBlk returns block k to the free list.
func (q *eventQueue) freeBlk(k int32) {
	q.blkNext[k] = q.free
	q.free = k
}

// push schedules an action at time at (clamped to maxAt; equal times keep push order,
// modulo 2^seqBits pushes).
func (q *eventQueue) push(at int64, val uint64) {
	if at > maxAt {
		at = maxAt
	}
	q.seq++
	e := event{key: uint64(at)<<seqBits | q.seq&(1<<seqBits-1), val: val}
	if uint64(at-q.cur) >= wheelLen { // before cur, or beyond the wheel
		q.far.push(e)
		return
	}
	if q.bk == nil {
		q.init()
	}
	q.n++
	b := &q.bk[at&wheelMask]
	if b.head < 0 {
		nb := q.newBlk()
		q.blks[nb][0] = e
		*b = bucket{head: nb, tail: nb, lo: 0, hi: 1}
		q.used[(at&wheelMask)>>6] |= 1 << (at & 63)
		return
	}
	if q.blks[b.tail][b.hi-1].key <= e.key {
		q.appendTo(b, e)
		return
	}
	// The sequence number wrapped since the bucket's last push: insert in key order,
	// moving the later events one slot on.
	k, i := b.head, b.lo
	for q.blks[k][i].key <= e.key {
		if i++; i == blkLen {
			k, i = q.blkNext[k], 0
		}
	}
	for k != b.tail || i < b.hi {
		q.blks[k][i], e = e, q.blks[k][i]
		if i++; i == blkLen && k != b.tail {
			k, i = q.blkNext[k], 0
		}
	}
	q.appendTo(b, e)
}

// appendTo puts e after the last event of the non-empty bucket b.
func (q *eventQueue) appendTo(b *bucket, e event) {
	if b.hi == blkLen {
		nb := q.newBlk()
		q.blkNext[b.tail] = nb
		b.tail, b.hi = nb, 0
	}
	q.blks[b.tail][b.hi] = e
	b.hi++
}

func (q *eventQueue) init() {
	q.bk = make([]bucket, wheelLen)
	for i := range q.bk {
		q.bk[i] = bucket{-1, -1, 0, 0}
	}
	q.used = make([]uint64, wheelLen/64)
	q.free = -1
	q.pfBlk = -1
}

// lookahead moves the cursor on and records the event under it in pfHist: the event
// recorded k calls ago is then about pfDist-k pops ahead. Only a hint: the cursor restarts
// at the head when it has been overtaken, and stops at the end of its nanosecond.
func (q *eventQueue) lookahead() {
	q.pfN++
	q.pfHist[q.pfN&7] = event{}
	if q.n == 0 {
		return
	}
	b := &q.bk[q.cur&wheelMask]
	if q.pfAhead <= 0 || q.pfBlk < 0 || q.blks[q.pfBlk][q.pfIdx].key != q.pfKey {
		if b.head < 0 {
			q.pfBlk = -1
			return
		}
		q.pfBlk, q.pfIdx = b.head, b.lo
		q.pfAhead = 0
	}
	for step := 0; step < 2 && q.pfAhead < pfDist; step++ {
		k, i := q.pfBlk, q.pfIdx+1
		if k == b.tail && i >= b.hi {
			break // the end of the bucket
		}
		if i == blkLen {
			if k, i = q.blkNext[k], 0; k < 0 {
				break
			}
		}
		q.pfBlk, q.pfIdx = k, i
		q.pfAhead++
	}
	e := q.blks[q.pfBlk][q.pfIdx]
	q.pfKey = e.key
	q.pfHist[q.pfN&7] = e
}

// pfBack returns the event the cursor recorded k calls ago (k < 8; kind 0: none).
func (q *eventQueue) pfBack(k uint32) event { return q.pfHist[(q.pfN-k)&7] }

// advance moves cur to the first non-empty bucket; the wheel must not be empty.
func (q *eventQueue) advance() {
	i := int(q.cur & wheelMask)
	w := i >> 6
	if m := q.used[w] >> (i & 63); m != 0 {
		q.cur += int64(bits.TrailingZeros64(m))
		return
	}
	d := 64 - i&63
	for k := 1; ; k++ {
		if m := q.used[(w+k)&(wheelLen/64-1)]; m != 0 {
			q.cur += int64(d + bits.TrailingZeros64(m))
			return
		}
		d += 64
	}
}

// headEv is the first event of the wheel's first non-empty bucket; the wheel must not
// be empty.
func (q *eventQueue) headEv() event {
	q.advance()
	b := &q.bk[q.cur&wheelMask]
	return q.blks[b.head][b.lo]
}

// pop removes and returns the earliest event; the queue must not be empty.
func (q *eventQueue) pop() event {
	e, _ := q.popUntil(maxAt)
	return e
}

// popUntil removes and returns the earliest event if it is due at or before t (ok false:
// it is later, and stays); the queue must not be empty.
func (q *eventQueue) popUntil(t int64) (e event, ok bool) {
	if q.n == 0 {
		if q.far.h[0].at() > t {
			return event{}, false
		}
		e := q.far.pop()
		q.cur = max(q.cur, e.at())
		return e, true
	}
	q.advance()
	b := &q.bk[q.cur&wheelMask]
	e = q.blks[b.head][b.lo]
	if len(q.far.h) > 0 && q.far.h[0].key < e.key {
		// Before cur (pushed in the past) or a heap event now due.
		if q.far.h[0].at() > t {
			return event{}, false
		}
		return q.far.pop(), true
	}
	if q.cur > t {
		return event{}, false
	}
	b.lo++
	q.n--
	q.pfAhead--
	if b.head == b.tail && b.lo == b.hi {
		q.freeBlk(b.head)
		*b = bucket{-1, -1, 0, 0}
		q.used[(q.cur&wheelMask)>>6] &^= 1 << (q.cur & 63)
	} else if b.lo == blkLen {
		h := b.head
		b.head, b.lo = q.blkNext[h], 0
		q.freeBlk(h)
	}
	return e, true
}

// heap4 is a 4-ary min-heap of events.
type heap4 struct{ h []event }

func (q *heap4) push(e event) {
	q.h = append(q.h, e)
	h := q.h
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) >> 2
		if e.key >= h[p].key {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
}

func (q *heap4) pop() event {
	h := q.h
	top := h[0]
	n := len(h) - 1
	last := h[n]
	h = h[:n]
	q.h = h
	if n == 0 {
		return top
	}
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		end := min(c+4, n)
		for j := c + 1; j < end; j++ {
			if h[j].key < h[m].key {
				m = j
			}
		}
		if h[m].key >= last.key {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = last
	return top
}
