package sim

// The event core: a 4-ary min-heap of small, pointer-free events keyed by (time, sequence
// number). The sequence number makes the order of simultaneous events the order they were
// scheduled in, so a run is a pure function of its inputs and seed. Nothing is allocated
// once the heap has reached its working size, and the garbage collector never scans it.

// evKind says what an event does.
type evKind uint8

const (
	evArrive evKind = iota + 1 // packet id reaches node arg (switch: its output port; host: delivery)
	evWake                     // output port id may start its next packet
	evNIC                      // host id's NIC finished serialising a packet
	evTimer                    // host id's engine timer (arg: generation)
	evStart                    // flow id starts
	evFault                    // failure action id
	evSample                   // queue sampling tick
	evRoute                    // routing converges (recompute the usable next hops)
	evUser                     // benchmarks and tests
)

// event is one scheduled action.
type event struct {
	at   int64
	seq  uint64
	id   int32
	arg  int32
	kind evKind
}

func (a *event) before(b *event) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

// eventQueue is the 4-ary heap.
type eventQueue struct {
	h   []event
	seq uint64
}

func (q *eventQueue) len() int { return len(q.h) }

// push schedules e (e.seq is assigned here).
func (q *eventQueue) push(e event) {
	q.seq++
	e.seq = q.seq
	q.h = append(q.h, e)
	h := q.h
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) >> 2
		if !e.before(&h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
}

// peekAt returns the time of the earliest event; the queue must not be empty.
func (q *eventQueue) peekAt() int64 { return q.h[0].at }

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
			if h[j].before(&h[m]) {
				m = j
			}
		}
		if !h[m].before(&last) {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = last
	return top
}
