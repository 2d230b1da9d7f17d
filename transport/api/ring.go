package api

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/transport/apitypes"
)

// The shared-memory receive ring (docs/api.md, "Receiving through shared memory"): a
// client passes a memfd with a RecvRing frame; the daemon maps it and copies each
// received message that fits into it once, announcing it with a small RecvAt frame
// (offset, size) instead of streaming it as Data frames; the client reads it in place
// and gives the space back with a Release frame naming the RecvAt frame's tag.
//
// The client is not trusted: the daemon never reads the ring (it only writes), every
// offset and length comes from its own table (recvRing.slots), and a Release that names
// no announced, unreleased message ends the session as a protocol error.

// Bounds of api.max_recv_ring and of the ring a client may ask for.
const (
	minRing = 4 << 10
	maxRing = 1 << 30
)

// ringAlign is the alignment of every message in the ring (a cache line).
const ringAlign = 64

// ringSlot is one message in the ring: the span [start, end) in absolute ring positions
// (start % size is its offset; the span may begin with the unused tail of the previous
// lap), and whether the client was told of it and has released it.
type ringSlot struct {
	tag        uint32
	start, end int64
	announced  bool
	released   bool
	queued     bool   // a placed message whose RecvAt waits in the session's queue
	tok        uint64 // a placement the engine is receiving into (Server.Place), until it ends
}

// recvRing is a session's receive ring: a FIFO of messages over a byte ring. Space is
// reclaimed in order, so a message the client holds keeps the ones after it too.
type recvRing struct {
	mem        []byte
	size       int64
	head, tail int64      // absolute positions: [head, tail) is in use
	slots      []ringSlot // circular: count slots from first
	first      int
	count      int
}

func newRecvRing(mem []byte) *recvRing {
	return &recvRing{mem: mem, size: int64(len(mem)), slots: make([]ringSlot, 64)}
}

// alloc reserves n bytes for the message tagged tag and returns their offset; false when
// the ring has no room for them now (it never has for n > size).
func (r *recvRing) alloc(tag uint32, n int64) (int64, bool) {
	if n <= 0 || n > r.size {
		return 0, false
	}
	if r.count == 0 {
		r.head, r.tail = 0, 0 // empty: start over at offset 0
	}
	start := r.tail
	if pos := start % r.size; pos+n > r.size {
		start += r.size - pos // skip the tail: a message is contiguous
	}
	// Positions are multiples of ringAlign (the size is a multiple of the page), so the
	// aligned end fits whenever the message does.
	end := start + (n+ringAlign-1)&^(ringAlign-1)
	if end-r.head > r.size {
		return 0, false
	}
	if r.count == len(r.slots) {
		grown := make([]ringSlot, 2*len(r.slots))
		for i := range r.count {
			grown[i] = r.slots[(r.first+i)%len(r.slots)]
		}
		r.slots, r.first = grown, 0
	}
	r.slots[(r.first+r.count)%len(r.slots)] = ringSlot{tag: tag, start: start, end: end}
	r.count++
	r.tail = end
	return start % r.size, true
}

// find returns the index (from first) of the slot tagged tag, or -1. Tags increase (mod
// 2^32) from first to last, so the search is a bisection on tag - first tag.
func (r *recvRing) find(tag uint32) int {
	if r.count == 0 {
		return -1
	}
	base := r.slots[r.first].tag
	key := tag - base
	lo, hi := 0, r.count
	for lo < hi {
		m := (lo + hi) / 2
		if r.slots[(r.first+m)%len(r.slots)].tag-base < key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < r.count && r.slots[(r.first+lo)%len(r.slots)].tag == tag {
		return lo
	}
	return -1
}

// announce marks the message tagged tag as told to the client: from now on it may
// release it.
func (r *recvRing) announce(tag uint32) {
	if i := r.find(tag); i >= 0 {
		r.slots[(r.first+i)%len(r.slots)].announced = true
	}
}

// Release errors (protocol errors: the session ends).
var (
	errReleaseUnknown = errors.New("release of a tag that names no message in the receive ring (never announced, or already released and reclaimed)")
	errReleaseEarly   = errors.New("release of a ring message not announced yet")
	errReleaseTwice   = errors.New("release of a ring message already released")
	errReleaseNoRing  = errors.New("release without a receive ring (send RecvRing first)")
)

// release gives the message tagged tag back and reclaims the space of every released
// message at the front of the ring; it reports whether space was reclaimed.
func (r *recvRing) release(tag uint32) (bool, error) {
	i := r.find(tag)
	if i < 0 {
		return false, errReleaseUnknown
	}
	s := &r.slots[(r.first+i)%len(r.slots)]
	switch {
	case !s.announced:
		return false, errReleaseEarly
	case s.released:
		return false, errReleaseTwice
	}
	s.released = true
	return r.reclaim(), nil
}

// markQueued notes that the placed message tagged tag is complete and its RecvAt frame
// waits in the session's queue.
func (r *recvRing) markQueued(tag uint32) {
	if i := r.find(tag); i >= 0 {
		r.slots[(r.first+i)%len(r.slots)].queued = true
	}
}

// setTok records that the slot tagged tag is the placement tok.
func (r *recvRing) setTok(tag uint32, tok uint64) {
	if i := r.find(tag); i >= 0 {
		r.slots[(r.first+i)%len(r.slots)].tok = tok
	}
}

// frontPlacing returns the token of the oldest message in the ring when the engine is
// still receiving it (a placement neither complete nor given back), else 0.
func (r *recvRing) frontPlacing() uint64 {
	if r.count == 0 {
		return 0
	}
	s := &r.slots[r.first]
	if s.queued || s.announced || s.released {
		return 0
	}
	return s.tok
}

// frontQueued reports whether the oldest message in the ring is a placed one whose
// RecvAt frame is queued and not written yet (nothing can free the ring before it is).
func (r *recvRing) frontQueued() bool {
	if r.count == 0 {
		return false
	}
	s := &r.slots[r.first]
	return s.queued && !s.announced
}

// cancel gives back the slot tagged tag, reserved for a message that will not be
// announced (a placement whose message failed), and reclaims what it can; it reports
// whether space was reclaimed.
func (r *recvRing) cancel(tag uint32) bool {
	i := r.find(tag)
	if i < 0 {
		return false
	}
	s := &r.slots[(r.first+i)%len(r.slots)]
	s.announced, s.released = true, true
	return r.reclaim()
}

// reclaim frees the released messages at the front of the ring.
func (r *recvRing) reclaim() bool {
	freed := false
	for r.count > 0 && r.slots[r.first].released {
		r.head = r.slots[r.first].end
		r.slots[r.first] = ringSlot{}
		r.first = (r.first + 1) % len(r.slots)
		r.count--
		freed = true
	}
	return freed
}

// used returns the bytes of the ring in use (messages not released, and the skipped
// tails between them).
func (r *recvRing) used() int64 { return r.tail - r.head }

// mapRing checks that fd is a memfd on shmem (not hugetlbfs), sealed against shrinking
// and growing and not against writes, of size bytes, and maps it shared for writing. The
// seals make sure the client cannot truncate the pages under the daemon's writes (which
// would fault the daemon); hugetlbfs is refused because a write to a page it cannot
// supply faults too.
func mapRing(fd int, size uint64, limit int64) ([]byte, error) {
	page := uint64(os.Getpagesize())
	if limit == 0 {
		return nil, errors.New("receive rings are off on this daemon (api.max_recv_ring = 0)")
	}
	if size < minRing || size > uint64(limit) || size%page != 0 {
		return nil, fmt.Errorf("receive ring of %d bytes: api.max_recv_ring allows %d..%d bytes in multiples of the page size (%d)",
			size, minRing, limit, page)
	}
	seals, err := sealedShmem(fd)
	if err == nil && writeSealed(seals) {
		err = fmt.Errorf("memfd sealed against writes (seals 0x%x): the daemon writes into it", seals)
	}
	if err != nil {
		return nil, fmt.Errorf("receive ring: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("receive ring: fstat: %w", err)
	}
	if uint64(st.Size) != size {
		return nil, fmt.Errorf("receive ring memfd holds %d bytes, announced %d", st.Size, size)
	}
	if err := ringAllocated(&st); err != nil {
		return nil, err
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("receive ring: mmap: %w", err)
	}
	// The client allocates the ring's pages (fallocate, or writing them): the daemon
	// never does, or a sparse memfd would make it allocate (and be charged for) memory
	// the client never paid for. Nothing is faulted in here.
	return mem, nil
}

// ringAllocated checks that every page of the ring's memfd is allocated (st_blocks
// covers its size: fallocate or writes by the client). mincore would not do: shmem pages
// that fallocate allocated are not "resident" to it until written.
func ringAllocated(st *unix.Stat_t) error {
	if have := st.Blocks * 512; have < st.Size {
		return fmt.Errorf("receive ring memfd: %d of its %d bytes are not allocated: allocate them (fallocate or write) before RecvRing; the daemon does not",
			st.Size-have, st.Size)
	}
	return nil
}

// handleRecvRing sets up the session's receive ring from the memfd fd (always closed
// here: the mapping keeps the pages); messages smaller than least keep coming over the
// socket. A refusal gets Error 12 with the request's tag; the session goes on with the
// socket path.
func (x *session) handleRecvRing(tag uint32, size, least uint64, fd int) {
	s := x.srv
	mem, err := mapRing(fd, size, s.cfg.MaxRecvRing)
	unix.Close(fd)
	if err == nil {
		x.mu.Lock()
		switch {
		case x.dead || x.writerGone:
			err = errors.New("session closing")
		case x.ring != nil:
			err = fmt.Errorf("the session already has a receive ring of %d bytes", x.ring.size)
		default:
			x.ring = newRecvRing(mem)
			x.ringMin = int64(min(least, size)) // a minimum past the ring is the ring's size
			s.ringSessions.Add(1)
			// Queued in the same critical section: every RecvAt comes after it.
			x.queue = append(x.queue, outFrame{typ: FrameRingOK, tag: tag, payload: apitypes.AppendSize(nil, size)})
			x.cond.Signal()
		}
		x.mu.Unlock()
		if err == nil {
			return
		}
		unix.Munmap(mem)
	}
	s.ringRefused.Add(1)
	x.enqueueError(tag, CodeRing, err.Error())
}

// handleRelease validates and applies a Release frame's tags; an invalid one is a
// protocol error (counted in ring_bad_releases).
func (x *session) handleRelease(p []byte) error {
	n, err := apitypes.ParseRelease(p)
	if err != nil {
		return errProtocol{err}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ring == nil {
		x.srv.ringBadReleases.Add(1)
		return errProtocol{errReleaseNoRing}
	}
	freed := false
	for i := range n {
		tag := apitypes.ReleaseTag(p, i)
		f, err := x.ring.release(tag)
		if err != nil {
			x.srv.ringBadReleases.Add(1)
			return errProtocol{fmt.Errorf("%w (tag %d)", err, tag)}
		}
		freed = freed || f
	}
	if freed {
		x.ringProgress = time.Now().UnixNano()
		x.cond.Broadcast() // a writer may wait for room
	}
	return nil
}

// closeRingLocked unmaps the ring; only the writer's exit calls it (the writer copies
// into the ring outside x.mu).
func (x *session) closeRingLocked() {
	if x.ring != nil {
		if x.placing == 0 {
			unix.Munmap(x.ring.mem)
		} else {
			x.ringOrphan = x.ring.mem // the engine still writes placed messages into it
		}
		x.ring = nil
		x.srv.ringSessions.Add(-1)
	}
}

// unmapOrphanLocked unmaps a closed session's ring once no placed message is written
// into it any more.
func (x *session) unmapOrphanLocked() {
	if x.ringOrphan != nil && x.placing == 0 {
		unix.Munmap(x.ringOrphan)
		x.ringOrphan = nil
	}
}

// copyBody copies body's bytes (past its skip) into dst.
func copyBody(dst []byte, b msgBody) {
	off, at := b.skip, 0
	for _, p := range b.pieces {
		if off >= len(p) {
			off -= len(p)
			continue
		}
		at += copy(dst[at:], p[off:])
		off = 0
	}
}

// errRingStalled ends a session whose client released no ring space for write_timeout
// while a message waited for room.
var errRingStalled = errors.New("no receive-ring space released within api.write_timeout")

// errRingPlaced sends a ring message over the socket instead: the ring is full and
// placed messages hold part of it (toRingLocked).
var errRingPlaced = errors.New("ring full with placed messages pending")

// errRingGone ends the writing of a ring message when the session is closing.
var errRingGone = errors.New("session closing")

// toRingLocked waits for room in the ring for the received message f (bounded by
// write_timeout without any release), copies it there with x.mu released, and marks it
// announced: the writer then writes its RecvAt frame. Before it waits it flushes what the
// writer buffered (the client must see the messages it is to release). x.mu is held on
// entry and exit.
func (x *session) toRingLocked(f *outFrame, flush func() error) error {
	defer func() { x.ringPend-- }() // allocated, or never will be
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	start := time.Now().UnixNano()
	flushed := false
	for {
		if x.dead || x.ring == nil {
			return errRingGone
		}
		if off, ok := x.ring.alloc(f.tag, f.body.n); ok {
			f.ringOff = off
			break
		}
		if x.ring.frontQueued() {
			// The oldest message in the ring is a placed one whose RecvAt waits in the
			// queue behind this one: room can come only after this one is written.
			return errRingPlaced
		}
		if !flushed {
			flushed = true
			x.mu.Unlock()
			err := flush()
			x.mu.Lock()
			if err != nil {
				return err
			}
			continue
		}
		now := time.Now().UnixNano()
		since := max(start, x.ringProgress)
		if tok := x.ring.frontPlacing(); tok != 0 && now-since >= int64(ringDisplaceAfter) {
			x.displaceLocked(tok)
			start = now // the wait for the client starts afresh
			continue
		}
		wait := time.Duration(since + int64(x.srv.cfg.WriteTimeout) - now)
		if x.srv.cfg.RecvBackpressure {
			wait = time.Hour // the client is held back, not disconnected: wait for releases
		} else if wait <= 0 {
			return errRingStalled
		}
		if x.ring.frontPlacing() != 0 {
			wait = min(wait, time.Duration(since+int64(ringDisplaceAfter)-now))
		}
		if t == nil {
			t = time.AfterFunc(wait, func() {
				x.mu.Lock()
				x.cond.Broadcast()
				x.mu.Unlock()
			})
		} else {
			t.Reset(wait)
		}
		x.cond.Wait()
	}
	mem := x.ring.mem[f.ringOff : f.ringOff+f.body.n]
	x.mu.Unlock()
	copyBody(mem, f.body) // the slot is reserved and not announced: nobody else touches it
	x.mu.Lock()
	if x.ring != nil {
		x.ring.announce(f.tag)
	}
	x.srv.ringMsgs.Add(1)
	x.srv.ringBytes.Add(uint64(f.body.n))
	return nil
}

// Placement (transport.Placer): the engine receives a large message for a session with a
// receive ring straight into a slot of the ring reserved when its first packet arrives,
// so that delivery writes only its RecvAt frame. What the daemon needs of the message
// (its endpoints, its size) is taken from the engine's first packet and kept here, never
// read back from the ring, which the client can write into.

// placement is a slot of a session's ring that the engine is receiving a message into.
type placement struct {
	x        *session
	tag      uint32
	off, n   int64 // the whole message (envelope included) at ring offset off
	dst, src uint32
}

// Place implements transport.Placer: a slot of the ring of the session bound to the
// message's endpoint, when it has one, the message's body is at least the session's
// smallest ring message, the session's placements hold at most half its ring, and no
// received message waits for ring room (slots follow their tags' order).
func (s *Server) Place(peer netip.AddrPort, n int, head []byte) ([]byte, uint64) {
	dst, src, ok := parseEnvelope(head)
	if !ok {
		return nil, 0
	}
	s.mu.Lock()
	x := s.eps[dst]
	s.mu.Unlock()
	if x == nil {
		return nil, 0
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.ring
	size := int64(n)
	if r == nil || x.dead || size-envelopeLen < x.ringMin || x.ringPend > 0 || x.placedBytes+size > r.size/2 {
		return nil, 0
	}
	tag := x.recvSeq + 1
	off, ok := r.alloc(tag, size)
	if !ok {
		return nil, 0
	}
	x.recvSeq = tag
	x.placing++
	x.placedBytes += size
	s.placeMu.Lock()
	s.placeSeq++
	tok := s.placeSeq
	s.places[tok] = placement{x: x, tag: tag, off: off, n: size, dst: dst, src: src}
	s.placeMu.Unlock()
	r.setTok(tag, tok)
	s.ringPlaced.Add(1)
	return r.mem[off : off+size : off+size], tok
}

// Unplace implements transport.Placer: the message will not come; its slot is given back.
func (s *Server) Unplace(tok uint64) {
	p, ok := s.takePlacement(tok)
	if !ok {
		return
	}
	x := p.x
	x.mu.Lock()
	defer x.mu.Unlock()
	x.placing--
	x.placedBytes -= p.n
	if x.ring != nil && x.ring.cancel(p.tag) {
		x.cond.Broadcast() // a message waiting for room may fit now
	}
	x.unmapOrphanLocked()
}

// takePlacement removes and returns the placement of tok.
func (s *Server) takePlacement(tok uint64) (placement, bool) {
	s.placeMu.Lock()
	defer s.placeMu.Unlock()
	p, ok := s.places[tok]
	delete(s.places, tok)
	return p, ok
}

// deliverPlaced announces a message the engine received into its session's ring: only
// its RecvAt frame is written.
func (s *Server) deliverPlaced(from netip.AddrPort, tok uint64) {
	p, ok := s.takePlacement(tok)
	if !ok {
		s.undeliverable.Add(1)
		return
	}
	x := p.x
	h := RecvHeader{From: from, FromEndpoint: p.src, Endpoint: p.dst, Size: uint64(p.n - envelopeLen)}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.placing--
	x.placedBytes -= p.n
	if x.dead || x.ring == nil {
		x.unmapOrphanLocked()
		s.undeliverable.Add(1)
		return
	}
	off := p.off + envelopeLen
	if !x.writing && len(x.queue) == 0 && x.srv.cfg.DirectWrites && x.rawLocked() {
		x.ring.announce(p.tag)
		x.writeRecvAtLocked(p.tag, h, off)
	} else {
		// The writer announces it when it writes it; a message waiting for ring room
		// ahead of it goes over the socket if this one holds the room (toRingLocked).
		x.flushHeldLocked()
		x.ring.markQueued(p.tag)
		x.queue = append(x.queue, outFrame{typ: FrameRecvAt, tag: p.tag, recv: h, ringOff: off, placed: true})
		x.cond.Broadcast()
	}
	s.ringMsgs.Add(1)
	s.ringBytes.Add(h.Size)
	s.msgsDelivered.Add(1)
	s.bytesDelivered.Add(h.Size)
}

// ringDisplaceAfter bounds how long a placement the engine is still receiving may keep a
// message that waits for ring room from being written: then it is displaced.
const ringDisplaceAfter = 100 * time.Millisecond

// displaceLocked moves the placement tok, the oldest message in the ring and still being
// received, out of the ring: the engine copies what arrived into its own buffers (charged
// to its receive budget as before) and delivers the message in them later, like any
// other; the slot is given back, so the released messages behind it are reclaimed. A
// peer that trickles a large message thus holds none of a client's ring that the client
// needs. x.mu is held on entry and exit (released around the engine's call).
func (x *session) displaceLocked(tok uint64) {
	s := x.srv
	x.mu.Unlock()
	ok := s.node != nil && s.node.Displace(tok)
	var p placement
	if ok {
		p, ok = s.takePlacement(tok)
	}
	x.mu.Lock()
	if ok {
		x.displacedLocked(p)
	} // else it completed or failed meanwhile: its slot goes the usual way
}

// displacedLocked gives back the ring slot of placement p, which the engine no longer
// writes into (displaceLocked).
func (x *session) displacedLocked(p placement) {
	x.srv.ringDisplaced.Add(1)
	x.placing--
	x.placedBytes -= p.n
	if x.ring != nil && x.ring.cancel(p.tag) {
		x.cond.Broadcast()
	}
	x.unmapOrphanLocked()
}
