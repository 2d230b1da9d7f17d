// Package switchport models one switch output port the way the papers' htsim model does
// (SMaRTT-REPS and REPS evaluations; docs/references.md), for the discrete-event simulator (test/sim) and the emulated
// testbed switch alike, so the two never drift apart.
//
// # Model
//
// A port has a FIFO data queue and a strict-priority control queue (ACKs, NACKs, trimmed
// headers), both counted in bytes, and serialises one packet at a time at Rate, control
// first. Occupancy counts the packets waiting, not the one being serialised.
//
//   - ECN: RED marking decided when a packet leaves the data queue, on the bytes it leaves
//     behind there: probability 0 at or below KminBytes, rising linearly to 1 at
//     KmaxBytes; only ECT packets are marked.
//   - Trimming: a data packet that does not fit the data queue is, with Trim, cut to
//     TrimBytes and queued on the control queue; if that is full too it is dropped.
//     Without Trim it is dropped (drop-tail). With ReturnToSender the cut header is not
//     queued here: Arrive reports Returned and the caller sends it back toward the
//     packet's sender (addresses swapped, marked returned), as the AI-training study's
//     "return-to-sender" trimming does.
//
// # Departure-time-driven service
//
// The port never needs a timer of its own: it computes when each packet starts and ends
// serialisation from the arrival times it is given. Arrive(now, ...) first serves every
// packet whose service starts at or before now, then offers the new one; Advance(now)
// only serves. Served packets are collected with Pop, each with its exact start and end
// times and its marking. A caller whose clock is coarse (a userspace switch woken every
// few microseconds) passes each packet's own arrival timestamp and still gets exact
// marks and trims; an event-driven caller (the simulator) calls Advance at NextStart.
// Times must not go backwards.
//
// The port is generic over the caller's packet handle T and never touches packet bytes:
// the caller cuts trimmed packets and sets CE on marked ones.
package switchport

import (
	"fmt"
	"unsafe"
)

// DefaultTrimBytes is the wire size of a trimmed packet when Config.TrimBytes is 0.
const DefaultTrimBytes = 64

// Config configures one output port.
type Config struct {
	// Rate is the line rate, bits/s (> 0).
	Rate int64
	// DataBytes is the data-queue capacity, bytes (0: unlimited).
	DataBytes int
	// ControlBytes is the control-queue capacity, bytes (0: unlimited).
	ControlBytes int
	// KminBytes: a packet leaving at most this many bytes behind is never marked.
	KminBytes int
	// KmaxBytes: a packet leaving at least this many bytes behind is always marked if ECT;
	// linear in between (0: no marking).
	KmaxBytes int
	// Trim cuts data packets that do not fit the data queue to TrimBytes instead of dropping them.
	Trim bool
	// TrimBytes is the size of a trimmed packet (0: DefaultTrimBytes).
	TrimBytes int
	// Evict is the probability (0..1) that a data packet finding the data queue full
	// takes the place of a queued one (the queue's head, or with EvictNewest its tail),
	// which is then trimmed (or, without Trim or room on the control queue, dropped and
	// handed out by PopEvicted); otherwise the arriving packet is. 0 (default) always acts
	// on the arriving packet; htsim's queues use 0.5. Drawn from the port's seeded generator.
	Evict float64
	// EvictNewest evicts the most recently queued packet instead of the oldest.
	EvictNewest bool
	// ReturnToSender (with Trim) hands a packet that does not fit the data queue back to
	// the caller instead of queueing its trimmed header here: Arrive returns Returned (an
	// evicted packet is handed out by PopReturned), and the caller cuts it to TrimBytes,
	// swaps its addresses and sends it toward its sender. Counted in Stats.Trims and
	// Stats.Returned.
	ReturnToSender bool
}

// Validate checks the ranges and names the offending field.
func (c *Config) Validate() error {
	switch {
	case c.Rate <= 0:
		return fmt.Errorf("switchport: rate = %d bit/s: must be > 0", c.Rate)
	case c.DataBytes < 0 || c.ControlBytes < 0:
		return fmt.Errorf("switchport: queue sizes (data %d, control %d bytes) must be >= 0", c.DataBytes, c.ControlBytes)
	case c.KmaxBytes < 0 || c.KminBytes < 0 || (c.KmaxBytes > 0 && c.KminBytes >= c.KmaxBytes):
		return fmt.Errorf("switchport: need 0 <= kmin (%d) < kmax (%d) bytes, or kmax 0 for no marking", c.KminBytes, c.KmaxBytes)
	case c.TrimBytes < 0:
		return fmt.Errorf("switchport: trim_bytes = %d: must be >= 0", c.TrimBytes)
	case c.ReturnToSender && !c.Trim:
		return fmt.Errorf("switchport: return_to_sender needs trimming on")
	case !(c.Evict >= 0 && c.Evict <= 1):
		return fmt.Errorf("switchport: evict = %v: must be in [0, 1]", c.Evict)
	case max(c.DataBytes, c.ControlBytes, c.KminBytes, c.KmaxBytes, c.TrimBytes) >= 1<<31:
		return fmt.Errorf("switchport: queue sizes and thresholds must be below 2 GiB")
	}
	return nil
}

// RED returns Kmin and Kmax as the given fractions of a data queue of buf bytes
// (20 % and 80 % by default, this implementation's choice).
func RED(buf int, kmin, kmax float64) (int, int) {
	return int(float64(buf) * kmin), int(float64(buf) * kmax)
}

// Verdict is what happened to an arriving packet.
type Verdict uint8

// Verdicts.
const (
	Queued  Verdict = iota // accepted unchanged
	Trimmed                // cut to TrimBytes and put on the control queue
	Dropped                // no room (the caller releases the packet)
	// Returned: trimmed with Config.ReturnToSender; not queued here, the caller sends the
	// cut header back toward the packet's sender.
	Returned
)

// String names the verdict.
func (v Verdict) String() string {
	return [...]string{"queued", "trimmed", "dropped", "returned"}[v]
}

// Departure is a packet that has started serialisation.
type Departure[T any] struct {
	Item    T
	Size    int   // bytes serialised (TrimBytes if trimmed)
	Start   int64 // service start, ns
	End     int64 // last bit out, ns
	Trimmed bool  // cut at this port
	Marked  bool  // CE-marked at this port
	Control bool  // served from the control queue
	// QLen is the data-queue bytes waiting behind the packet at its service start (the
	// queue length of its INT record, see INT).
	QLen uint32
}

// Stats are a port's cumulative counters.
type Stats struct {
	Enqueued        uint64 // packets accepted (trimmed headers included)
	Dequeued        uint64 // packets served
	Drops           uint64 // packets dropped because their queue was full
	Trims           uint64 // data packets trimmed (returned ones included)
	Returned        uint64 // trimmed packets handed back for return to sender (Config.ReturnToSender)
	Marks           uint64 // packets CE-marked
	BytesOut        uint64 // bytes serialised
	MaxDataBytes    int    // high-water mark of the data queue
	MaxControlBytes int    // high-water mark of the control queue
}

type entry[T any] struct {
	item    T
	size    int32
	ect     bool
	trimmed bool
}

// Port is one output port. It is not safe for concurrent use.
//
// The fields every packet touches come first and fill three cache lines (for a 16-byte
// T): a simulator keeps thousands of ports and comes back to each only after touching
// megabytes of others, so every line a packet touches is a cache miss.
type Port[T any] struct {
	busyUntil int64 // end of the packet in service (<= now: idle)
	rem       int64 // serialisation remainder, bit-ns mod rate
	rate      int64
	dataBytes int64
	ctrlBytes int64
	dataCap   int32 // 0: unlimited
	ctrlCap   int32
	kmin      int32
	kmax      int32
	trimSize  int32
	trim      bool
	hasOut0   bool // out0 holds the oldest served packet not yet collected
	data      ring[entry[T]]
	ctrl      ring[entry[T]]
	out0      Departure[T]
	dequeued  uint64
	bytesOut  uint64
	// Less often: queue growth, marking, drops, further served packets, configuration.
	maxData, maxCtrl    int64
	rng                 uint64
	marks, drops, trims uint64
	flushed             uint64             // queued packets removed by Flush or dropped by eviction (counted in Enqueued)
	out                 ring[Departure[T]] // served packets after out0
	evictQ32            uint64             // Config.Evict as a fraction of 2^32
	evicted             ring[T]            // heads dropped by eviction, for PopEvicted
	returned            ring[T]            // heads evicted for return to sender, for PopReturned
	nReturned           uint64
	rts                 bool
	cfg                 Config
}

// New returns an idle port; seed drives its RED marking decisions.
func New[T any](cfg Config, seed uint64) (*Port[T], error) {
	p := &Port[T]{}
	if err := p.Init(cfg, seed); err != nil {
		return nil, err
	}
	return p, nil
}

// Init makes p an idle port with cfg (for ports embedded in larger arrays).
func (p *Port[T]) Init(cfg Config, seed uint64) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	*p = Port[T]{cfg: cfg, rng: seed ^ 0x9e3779b97f4a7c15, rate: cfg.Rate,
		dataCap: int32(cfg.DataBytes), ctrlCap: int32(cfg.ControlBytes),
		kmin: int32(cfg.KminBytes), kmax: int32(cfg.KmaxBytes),
		trim: cfg.Trim, trimSize: int32(cfg.TrimBytes), rts: cfg.Trim && cfg.ReturnToSender}
	if p.trimSize == 0 {
		p.trimSize = DefaultTrimBytes
	}
	p.evictQ32 = uint64(cfg.Evict * (1 << 32))
	return nil
}

// Rate returns the port's current line rate, bits/s.
func (p *Port[T]) Rate() int64 { return p.rate }

// Config returns the port's configuration.
func (p *Port[T]) Config() Config { return p.cfg }

// Stats returns the counters.
func (p *Port[T]) Stats() Stats {
	return Stats{
		Enqueued:        p.dequeued + uint64(p.Queued()) + p.flushed,
		Dequeued:        p.dequeued,
		Drops:           p.drops,
		Trims:           p.trims,
		Returned:        p.nReturned,
		Marks:           p.marks,
		BytesOut:        p.bytesOut,
		MaxDataBytes:    int(p.maxData),
		MaxControlBytes: int(p.maxCtrl),
	}
}

// DataBytes returns the data-queue occupancy as of the last Arrive/Advance.
func (p *Port[T]) DataBytes() int { return int(p.dataBytes) }

// ControlBytes returns the control-queue occupancy as of the last Arrive/Advance.
func (p *Port[T]) ControlBytes() int { return int(p.ctrlBytes) }

// Queued returns the number of packets waiting in both queues.
func (p *Port[T]) Queued() int { return p.ctrl.len() + p.data.len() }

// BusyUntil returns when the packet in service (if any) ends.
func (p *Port[T]) BusyUntil() int64 { return p.busyUntil }

// SetRate changes the line rate from now on (a degraded link); the packet in service
// keeps its end time.
func (p *Port[T]) SetRate(now int64, rate int64) {
	if rate <= 0 {
		panic("switchport: SetRate needs a positive rate")
	}
	p.Advance(now)
	p.cfg.Rate = rate
	p.rate = rate
	p.rem = 0
}

// SetTrimBytes changes the size later arrivals are trimmed to (> 0), for a caller whose
// trimmed headers differ per packet (test/testnet keeps a packet's INT block); it does not
// change packets already queued.
func (p *Port[T]) SetTrimBytes(n int) {
	if n <= 0 || n >= 1<<31 {
		panic("switchport: SetTrimBytes needs a size in (0, 2 GiB)")
	}
	p.cfg.TrimBytes = n
	p.trimSize = int32(n)
}

// NextStart returns when the next queued packet starts service, if any is queued.
func (p *Port[T]) NextStart() (int64, bool) {
	if p.ctrl.len() == 0 && p.data.len() == 0 {
		return 0, false
	}
	return p.busyUntil, true
}

// Arrive serves up to now, then offers a packet of size bytes arriving at now. data says
// it is a data packet (trimmable, data queue); otherwise it is control traffic. ect says
// it may be CE-marked.
func (p *Port[T]) Arrive(now int64, item T, size int, data, ect bool) Verdict {
	p.Advance(now)
	if p.busyUntil <= now && p.ctrl.size == 0 && p.data.size == 0 &&
		(data && (p.dataCap == 0 || int64(size) <= int64(p.dataCap)) ||
			!data && (p.ctrlCap == 0 || int64(size) <= int64(p.ctrlCap))) {
		// Idle with empty queues: served at once, as if queued and taken straight out
		// (it leaves an empty data queue behind, so it is never marked).
		p.busyUntil = now
		p.start(entry[T]{item: item, size: int32(size)}, !data)
		return Queued
	}
	v := Queued
	switch {
	case !data:
		if !p.pushCtrl(entry[T]{item: item, size: int32(size)}) {
			p.drops++
			return Dropped
		}
	case p.dataCap == 0 || p.dataBytes+int64(size) <= int64(p.dataCap) ||
		p.evictQ32 != 0 && p.data.len() > 0 && int64(size) <= int64(p.dataCap) && p.rand32() < p.evictQ32 && p.evict(size):
		p.data.push(entry[T]{item: item, size: int32(size), ect: ect})
		p.dataBytes += int64(size)
	case p.rts:
		p.trims++
		p.nReturned++
		return Returned
	case p.trim:
		if !p.pushCtrl(entry[T]{item: item, size: min(int32(size), p.trimSize), trimmed: true}) {
			p.drops++
			return Dropped
		}
		p.trims++
		v = Trimmed
	default:
		p.drops++
		return Dropped
	}
	if p.busyUntil <= now {
		p.busyUntil = now
		p.serve()
	}
	// High-water marks of what waits (a packet served at once never queued).
	p.maxData = max(p.maxData, p.dataBytes)
	p.maxCtrl = max(p.maxCtrl, p.ctrlBytes)
	return v
}

// evict makes room for an arriving data packet of size bytes by removing packets from
// the head (or with EvictNewest the tail) of the data queue: each is trimmed onto the
// control queue (with Trim and room there) or dropped into the evicted list. It reports
// true (the caller queues the arriving packet); the caller made sure size fits an empty
// queue.
func (p *Port[T]) evict(size int) bool {
	for p.dataBytes+int64(size) > int64(p.dataCap) {
		var h entry[T]
		if p.cfg.EvictNewest {
			h = p.data.popBack()
		} else {
			h = p.data.pop()
		}
		p.dataBytes -= int64(h.size)
		if p.rts {
			p.trims++
			p.nReturned++
			p.flushed++
			p.returned.push(h.item)
			continue
		}
		if p.trim && p.pushCtrl(entry[T]{item: h.item, size: min(h.size, p.trimSize), trimmed: true}) {
			p.trims++
			continue
		}
		p.drops++
		p.flushed++
		p.evicted.push(h.item)
	}
	return true
}

// PopEvicted returns a queued packet that an arrival evicted and dropped (Config.Evict);
// the caller releases it as it would a Dropped arrival.
func (p *Port[T]) PopEvicted() (T, bool) {
	if p.evicted.len() == 0 {
		var zero T
		return zero, false
	}
	return p.evicted.pop(), true
}

// PopReturned returns a queued packet that an arrival evicted for return to sender
// (Config.Evict with ReturnToSender); the caller treats it as a Returned arrival.
func (p *Port[T]) PopReturned() (T, bool) {
	if p.returned.len() == 0 {
		var zero T
		return zero, false
	}
	return p.returned.pop(), true
}

// rand32 draws 32 bits from the port's generator (splitmix64, shared with RED marking).
func (p *Port[T]) rand32() uint64 {
	p.rng += 0x9e3779b97f4a7c15
	z := p.rng
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return (z ^ z>>31) >> 32
}

func (p *Port[T]) pushCtrl(e entry[T]) bool {
	if p.ctrlCap != 0 && p.ctrlBytes+int64(e.size) > int64(p.ctrlCap) {
		return false
	}
	p.ctrl.push(e)
	p.ctrlBytes += int64(e.size)
	return true
}

// Advance serves every packet whose service starts at or before now.
func (p *Port[T]) Advance(now int64) {
	for p.busyUntil <= now && p.serve() {
	}
}

// serve starts the next packet at busyUntil; it reports whether there was one.
func (p *Port[T]) serve() bool {
	switch {
	case p.ctrl.len() > 0:
		e := p.ctrl.pop()
		p.ctrlBytes -= int64(e.size)
		p.start(e, true)
	case p.data.len() > 0:
		e := p.data.pop()
		p.dataBytes -= int64(e.size)
		p.start(e, false)
	default:
		return false
	}
	return true
}

// start puts e in service at busyUntil and hands it to the collector.
func (p *Port[T]) start(e entry[T], ctl bool) {
	d := Departure[T]{Item: e.item, Size: int(e.size), Start: p.busyUntil, Trimmed: e.trimmed, Control: ctl,
		QLen: uint32(p.dataBytes)}
	if e.ect && p.mark() {
		d.Marked = true
		p.marks++
	}
	bitNs := int64(e.size)*8_000_000_000 + p.rem
	p.rem = bitNs % p.rate
	d.End = d.Start + bitNs/p.rate
	p.busyUntil = d.End
	p.dequeued++
	p.bytesOut += uint64(e.size)
	if !p.hasOut0 && p.out.size == 0 {
		p.out0, p.hasOut0 = d, true
	} else {
		p.out.push(d)
	}
}

// mark decides RED marking on the data-queue bytes left behind.
func (p *Port[T]) mark() bool {
	occ := p.dataBytes
	if p.kmax <= 0 || occ <= int64(p.kmin) {
		return false
	}
	if occ >= int64(p.kmax) {
		return true
	}
	// splitmix64: a cheap deterministic generator, 8 bytes of state per port.
	p.rng += 0x9e3779b97f4a7c15
	z := p.rng
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return z%uint64(p.kmax-p.kmin) < uint64(occ-int64(p.kmin))
}

// NextEntry returns the address of the queue entry served next (0: none is queued), for a
// caller that sees the port's next service coming to prefetch.
func (p *Port[T]) NextEntry() uintptr {
	r := &p.ctrl
	if r.size == 0 {
		r = &p.data
		if r.size == 0 {
			return 0
		}
	}
	return uintptr(unsafe.Pointer(&r.buf[r.head]))
}

// Pop returns the oldest served packet not yet collected.
func (p *Port[T]) Pop() (Departure[T], bool) {
	if p.hasOut0 {
		p.hasOut0 = false
		d := p.out0
		p.out0 = Departure[T]{} // drop the reference (T may be a pointer)
		return d, true
	}
	if p.out.len() == 0 {
		return Departure[T]{}, false
	}
	return p.out.pop(), true
}

// Flush removes every queued packet (a link that went down), passing each to drop; the
// packet in service and served packets not yet collected are kept.
func (p *Port[T]) Flush(drop func(T)) {
	for p.ctrl.len() > 0 {
		e := p.ctrl.pop()
		p.drops++
		p.flushed++
		if drop != nil {
			drop(e.item)
		}
	}
	for p.data.len() > 0 {
		e := p.data.pop()
		p.drops++
		p.flushed++
		if drop != nil {
			drop(e.item)
		}
	}
	p.ctrlBytes, p.dataBytes = 0, 0
}

// ring is a growable FIFO that allocates only when it grows.
type ring[T any] struct {
	buf        []T
	head, size int32
}

func (r *ring[T]) len() int { return int(r.size) }

func (r *ring[T]) push(v T) {
	if int(r.size) == len(r.buf) {
		n := max(2*len(r.buf), 8)
		nb := make([]T, n)
		for i := 0; i < int(r.size); i++ {
			nb[i] = r.buf[(int(r.head)+i)&(len(r.buf)-1)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(int(r.head)+int(r.size))&(len(r.buf)-1)] = v
	r.size++
}

// popBack removes the most recently pushed element.
func (r *ring[T]) popBack() T {
	var zero T
	i := (int(r.head) + int(r.size) - 1) & (len(r.buf) - 1)
	v := r.buf[i]
	r.buf[i] = zero
	r.size--
	return v
}

func (r *ring[T]) pop() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero
	r.head = (r.head + 1) & int32(len(r.buf)-1)
	r.size--
	return v
}
