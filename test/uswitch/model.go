package uswitch

// Model is a departure-time port model seen through functions, so that test/switchport's
// Port[*Frame] plugs in without this package depending on it:
//
//	p, _ := switchport.New[*uswitch.Frame](cfg, seed)
//	m := uswitch.Model{
//		Arrive: func(now int64, f *uswitch.Frame, size int, data, ect bool) uswitch.Verdict {
//			return uswitch.Verdict(p.Arrive(now, f, size, data, ect)) // same order: queued, trimmed, dropped
//		},
//		Advance:   p.Advance,
//		NextStart: p.NextStart,
//		Pop: func() (uswitch.Departure, bool) {
//			d, ok := p.Pop()
//			return uswitch.Departure{Frame: d.Item, End: d.End, Trimmed: d.Trimmed, Marked: d.Marked}, ok
//		},
//	}
//	q := uswitch.NewModelQueue(m, delay, trimDSCP)
//
// The model decides; the queue applies its decisions to the bytes (trim, CE mark) and
// hands the frame to the switch when its last bit has left plus the propagation delay.
type Model struct {
	// Arrive serves up to now, then offers a frame of size wire bytes; data says it may be
	// trimmed, ect that it may be marked.
	Arrive func(now int64, f *Frame, size int, data, ect bool) Verdict
	// Advance serves every frame whose service starts at or before now.
	Advance func(now int64)
	// NextStart is when the next queued frame starts service, if one is queued.
	NextStart func() (int64, bool)
	// Pop returns the oldest served frame not yet collected.
	Pop func() (Departure, bool)
	// PopReturned, if set, returns a queued frame the model evicted for return to sender
	// (switchport's PopReturned).
	PopReturned func() (*Frame, bool)
}

// Verdict is what a model did with an arriving frame.
type Verdict uint8

// Verdicts, in test/switchport's order.
const (
	Queued Verdict = iota
	Trimmed
	Dropped
	// Returned: the model trims the frame back to its sender (return-to-sender); the
	// queue turns it into the returned header and hands it to the switch (Returner).
	Returned
)

// Departure is a frame the model has served.
type Departure struct {
	Frame   *Frame
	End     int64 // its last bit leaves the port, ns
	Trimmed bool  // cut at this port
	Marked  bool  // CE-marked at this port
}

// WireOverhead is added to a frame's length for serialisation: preamble, start delimiter,
// frame check sequence and inter-packet gap.
const WireOverhead = 24

// ModelQueue adapts a Model to the switch's Queue.
type ModelQueue struct {
	m        Model
	delay    int64
	trimDSCP uint8
	head     Departure // served, waiting for its departure time
	has      bool
	returned []*Frame // returned headers for the switch to route (TakeReturned)
}

// NewModelQueue returns a Queue driven by m, with a propagation delay (ns) added to every
// departure and trimDSCP (0: none) written into trimmed frames.
func NewModelQueue(m Model, delay int64, trimDSCP uint8) *ModelQueue {
	return &ModelQueue{m: m, delay: delay, trimDSCP: trimDSCP}
}

// Enqueue offers f to the model. A frame the model returns to its sender becomes its
// returned header, handed out by TakeReturned.
func (q *ModelQueue) Enqueue(f *Frame, now int64) bool {
	switch q.m.Arrive(now, f, f.Len()+WireOverhead, f.IsData(), f.ECT()) {
	case Dropped:
		return false
	case Returned:
		if !f.ReturnToSender(q.trimDSCP) {
			return false
		}
		q.returned = append(q.returned, f)
	}
	if q.m.PopReturned != nil {
		for {
			e, ok := q.m.PopReturned()
			if !ok {
				break
			}
			if e.ReturnToSender(q.trimDSCP) {
				q.returned = append(q.returned, e)
			}
		}
	}
	return true
}

// TakeReturned returns the next returned header to route back toward its sender, or nil.
func (q *ModelQueue) TakeReturned() *Frame {
	if len(q.returned) == 0 {
		return nil
	}
	f := q.returned[0]
	q.returned[0] = nil
	q.returned = q.returned[1:]
	if len(q.returned) == 0 {
		q.returned = q.returned[:0:0]
	}
	return f
}

// Next is the departure of the served head frame, else the next service start (when the
// model must be advanced), else -1.
func (q *ModelQueue) Next() int64 {
	if q.fill() {
		return q.head.End + q.delay
	}
	if t, ok := q.m.NextStart(); ok {
		return t
	}
	return -1
}

// fill makes sure a served frame, if any, sits in head.
func (q *ModelQueue) fill() bool {
	if !q.has {
		q.head, q.has = q.m.Pop()
	}
	return q.has
}

// Dequeue advances the model to now and returns the head frame if it has left, with the
// model's trim and mark applied.
func (q *ModelQueue) Dequeue(now int64) *Frame {
	q.m.Advance(now)
	if !q.fill() || q.head.End+q.delay > now {
		return nil
	}
	d := q.head
	q.has = false
	d.Frame.Depart = d.End // when its last bit left the port (Config.Lose looks at it)
	if d.Trimmed {
		d.Frame.Trim(q.trimDSCP)
	}
	if d.Marked {
		d.Frame.SetCE()
	}
	return d.Frame
}
