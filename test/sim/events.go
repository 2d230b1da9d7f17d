package sim

// The event core: a 4-ary min-heap of small, pointer-free events keyed by (time, sequence
// number). The sequence number makes the order of simultaneous events the order they were
// scheduled in, so a run is a pure function of its inputs and seed. Nothing is allocated
// once the heap has reached its working size, and the garbage collector never scans it.

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

// eventQueue is the 4-ary heap.
type eventQueue struct {
	h   []event
	seq uint64
}

func (q *eventQueue) len() int { return len(q.h) }

// push schedules an action at time at (clamped to maxAt; equal times keep push order,
// modulo 2^seqBits pushes).
func (q *eventQueue) push(at int64, val uint64) {
	if at > maxAt {
		at = maxAt
	}
	q.seq++
	e := event{key: uint64(at)<<seqBits | q.seq&(1<<seqBits-1), val: val}
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

// peekAt returns the time of the earliest event; the queue must not be empty.
func (q *eventQueue) peekAt() int64 { return q.h[0].at() }

// pop removes and returns the earliest event; the queue must not be empty.
func (q *eventQueue) pop() event {
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
