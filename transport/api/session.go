package api

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/apitypes"
	"github.com/smartt-transport/smartt/transport/bufpool"
	"github.com/smartt-transport/smartt/transport/daemon"
)

// outFrame is a frame queued for a client; body, if set, follows as Data frames.
type outFrame struct {
	typ     uint8
	tag     uint32
	payload []byte
	body    msgBody
	held    int64      // a received message's charge to the receive queue (heldSize)
	drops   bool       // the drop notice: its payload is made from session.dropped when it is written
	raw     []byte     // bytes to write as they are (the rest of a direct write)
	ringOff int64      // FrameRecvAt: where the writer put the body in the ring
	placed  bool       // FrameRecvAt of a message the engine received into the ring (Server.Place)
	recv    RecvHeader // of a received message (FrameRecv, FrameRecvAt): encoded when written
	sent    SentInfo   // FrameSent: encoded when written
	fd      *os.File   // passed with the frame (SCM_RIGHTS), then closed (direct.go)
}

// msgBody is a received message's body: the pieces it came in (one buffer, or the
// engine's receive chunks), less skip bytes (the envelope) at the front.
type msgBody struct {
	pieces [][]byte
	skip   int
	n      int64    // body bytes
	chunks bool     // pieces are engine chunks: give them back once written
	local  *sendMsg // a local sender's buffer (local.go): given back once written
}

// release gives the engine's chunks (or a local sender's buffer) back.
func (b msgBody) release() {
	if b.chunks {
		transport.PutChunks(b.pieces)
	}
	if b.local != nil {
		b.local.put()
	}
}

// Reader states of a session (session.state).
const (
	stateWaiting = iota // between requests: the client may stay silent as long as it likes
	stateBusy           // a frame or a message is being read, or the session is closing
	stateEvicted        // closed to make room for a new client
)

// drops counts received messages dropped for a client since its last drop notice.
type drops struct {
	n      int
	bytes  int64
	from   RecvHeader
	size   int    // of the last one
	reason string // why the last one was dropped
}

// session is one client's messaging connection.
type session struct {
	srv     *Server
	id      uint64
	conn    net.Conn
	br      *frameReader
	cred    *PeerCred
	started time.Time

	endpoint    uint32 // guarded by srv.mu
	outstanding atomic.Int64
	state       atomic.Int32 // stateWaiting, stateBusy, stateEvicted
	lastActive  atomic.Int64 // unix ns of the last frame read or written

	mu        sync.Mutex
	cond      *sync.Cond
	queue     []outFrame
	writing   bool     // the writer holds a frame taken off the queue
	recvSizes []int64  // charges (heldSize) of the received messages waiting in the queue, in order
	iov       [][]byte // the writer's scratch list of pieces for one Data frame
	bufs      net.Buffers
	raw       syscall.RawConn
	direct    []byte // scratch for writeDirectLocked
	deadline  bool   // the reader armed a read deadline (beginFrame)
	// Lazy Sent frames (lazysent.go): lazySent is set before the session starts.
	lazySent     bool
	held         []byte // Sent frames held
	heldArmed    bool
	heldTimer    *time.Timer
	wanted       map[uint32]struct{} // tags the client waits for (WantSent)
	rawWrite     func(fd uintptr) bool
	rawBuf       []byte // what rawWrite writes
	rawN         int    // what it wrote
	rawErr       error
	directWrites uint64
	recvQueued   int64 // their sum (in srv.recvTotal too)
	recvWriting  int64 // the charge of the received message being written (in srv.recvTotal too)
	dropped      drops // since the last drop notice; a notice is queued while dropped.n > 0
	dead         bool  // the client is gone: drop everything
	draining     bool  // write what is queued, then close
	writerDone   chan struct{}
	recvSeq      uint32
	fdr          *fdReader           // descriptors passed by the client (nil when not a Unix socket)
	fdMaps       fdMaps              // the client's memfds mapped for their next messages (memfd.go)
	ring         *recvRing           // the shared-memory receive ring, if the client set one up (ring.go)
	ringMin      int64               // smaller messages come over the socket though there is a ring (RecvRing's second field)
	ringPend     int                 // received messages queued for the ring whose slot is not allocated yet
	placing      int                 // placements (Server.Place) in the ring not delivered or given back yet
	placedBytes  int64               // their bytes
	ringOrphan   []byte              // a closed session's ring mapping, kept while placing > 0
	version      int                 // the negotiated protocol version (1, 2), set before the session starts
	user         int64               // its user (userKey), set before the session starts
	tags         map[uint32]tracked  // version 2: outstanding messages by tag (cancel.go)
	localWait    []localMsg          // local messages waiting for room in this session's queue (local.go)
	localDoneBuf []localMsg          // admitLocal's scratch
	localRetry   bool                // an admitLocal retry is armed
	ringProgress int64               // unix ns of the last release that freed ring space
	writerGone   bool                // the writer exited
	scratch      []byte              // the writer's scratch for frame headers and payloads
	directOK     bool                // the direct path was negotiated, set before the session starts (direct.go)
	pairs        map[*session]uint64 // direct pairs by peer session, guarded by srv.mu (direct.go)

	// The reader's alone.
	engineHeld bool            // messages handed to the engine with SendHeld, not flushed yet
	accHeld    bool            // Accepted frames held until the burst of frames being read ends
	bodyHdr    [HeaderLen]byte // readBody's Data frame header (a field: a local would escape through readv)
}

func newSession(s *Server, id uint64, conn net.Conn, br *bufio.Reader) *session {
	x := &session{srv: s, id: id, conn: conn, started: time.Now(), writerDone: make(chan struct{})}
	if uc, ok := conn.(*net.UnixConn); ok {
		// Read through an fdReader so descriptors passed with SendFD frames are kept; bytes
		// the HTTP server buffered already come first.
		x.fdr = newFDReader(uc)
		ahead, _ := br.Peek(br.Buffered())
		x.br = newFrameReader(ahead, x.fdr, nil, s.cfg.DirectReads)
	} else {
		x.br = newFrameReader(nil, nil, br, s.cfg.DirectReads)
	}
	x.cond = sync.NewCond(&x.mu)
	x.touch()
	return x
}

// touch records activity: a frame read from or written to the client.
func (x *session) touch() { x.lastActive.Store(time.Now().UnixNano()) }

// idleFor is how long the session has been idle.
func (x *session) idleFor() time.Duration {
	return time.Duration(time.Now().UnixNano() - x.lastActive.Load())
}

func (x *session) info() SessionInfo {
	x.mu.Lock()
	q, w := x.recvQueued, x.recvWriting
	var ring, used int64
	if x.ring != nil {
		ring, used = x.ring.size, x.ring.used()
	}
	x.mu.Unlock()
	return SessionInfo{ID: x.id, Cred: x.cred, Endpoint: x.endpoint, Started: x.started,
		Outstanding: x.outstanding.Load(), RecvQueued: q, RecvWriting: w, IdleS: x.idleFor().Seconds(),
		RecvRing: ring, RecvRingUse: used}
}

// idleLocked reports whether the session may be evicted: its client is between requests,
// nothing is outstanding, nothing is queued or being written. x.mu is held.
func (x *session) idleLocked() bool {
	return x.state.Load() == stateWaiting && x.outstanding.Load() == 0 && len(x.queue) == 0 &&
		!x.writing && !x.dead && !x.draining
}

// evict closes an idle session whose slot went to a new client: it is told why (an Error
// frame with tag 0, code 11), then closed. x is already out of the server's tables.
func (x *session) evict(idle time.Duration) {
	x.enqueueError(0, CodeClosed, fmt.Sprintf("session closed: idle for %v while api.max_clients (%d) sessions were open and a new client arrived",
		idle.Round(time.Millisecond), x.srv.cfg.MaxClients))
	ctx, cancel := context.WithTimeout(x.srv.stop, time.Duration(x.srv.cfg.WriteTimeout))
	defer cancel()
	x.drain(ctx)
}

// maxQueuedFrames bounds the frames waiting for a client: one that stops reading while it
// keeps sending (completions pile up) is disconnected instead of growing the daemon.
var maxQueuedFrames = 1 << 16

// enqueue queues f unless the client is gone.
func (x *session) enqueue(f outFrame) {
	x.mu.Lock()
	stalled := x.enqueueLocked(f)
	x.mu.Unlock()
	if stalled {
		go x.kill() // not here: callers may hold locks kill takes
	}
}

// enqueueLocked queues f unless the client is gone; true when the client stalled (the
// caller kills the session once x.mu is released). x.mu is held.
func (x *session) enqueueLocked(f outFrame) bool {
	if x.dead {
		return false
	}
	if len(x.queue) >= maxQueuedFrames {
		return x.stallLocked()
	}
	if f.typ == FrameError || f.typ == FrameFailed {
		delete(x.wanted, f.tag)
	}
	x.flushHeldLocked()
	x.queue = append(x.queue, f)
	x.cond.Signal()
	return false
}

// stallLocked marks a client that does not read its frames as gone.
func (x *session) stallLocked() bool {
	x.dropAllLocked()
	x.srv.stalled.Add(1)
	x.srv.log.Warn("api client stopped reading; disconnecting it", "session", x.id, "queued_frames", maxQueuedFrames)
	return true
}

// dropAllLocked marks the session dead and forgets what is queued for it.
func (x *session) dropAllLocked() {
	x.dead = true
	for _, f := range x.queue {
		if f.fd != nil { // a direct pair's end never handed over: its peer's writes fail
			f.fd.Close()
		}
	}
	x.queue = nil
	x.srv.recvTotal.Add(-x.recvQueued - x.recvWriting)
	x.recvSizes, x.recvQueued, x.recvWriting = nil, 0, 0
	x.dropped = drops{}
	x.cond.Broadcast()
}

func (x *session) enqueueError(tag uint32, code uint16, text string) {
	x.enqueue(outFrame{typ: FrameError, tag: tag, payload: AppendError(nil, code, text)})
}

// Outcomes of enqueueRecv.
const (
	recvQueued   = iota
	recvGone     // the session is closing or gone
	recvOverflow // dropped at max_recv_queue
	recvTotal    // dropped at max_recv_queue_total
)

// enqueueRecv queues a received message unless that would exceed max_recv_queue or
// max_recv_queue_total: then the message is dropped and the client gets a drop notice
// (one Error frame, tag 0, code 7, for all drops until it is written). max_recv_queue
// bounds the bytes queued for the session besides its oldest message (the one being
// written, or next to be), so a message of any size passes when nothing else is queued,
// and a client that keeps up is never cut off while a large message is written to it.
// max_recv_queue_total counts every byte queued or being written.
func (x *session) enqueueRecv(h RecvHeader, body msgBody) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.enqueueRecvLocked(h, body, false)
}

// recvFullLocked reports whether a message of n bytes would pass max_recv_queue.
func (x *session) recvFullLocked(n int64) bool {
	return (x.recvWriting > 0 || x.recvQueued > 0) && x.behindLocked()+n > x.srv.cfg.MaxRecvQueue
}

// enqueueRecvLocked is enqueueRecv with x.mu held; reserved: the caller took the bytes
// from max_recv_queue_total and checked max_recv_queue (a local message, local.go).
func (x *session) enqueueRecvLocked(h RecvHeader, body msgBody, reserved bool) int {
	if x.dead {
		if reserved {
			x.srv.recvTotal.Add(-heldSize(body))
		}
		return recvGone
	}
	x.recvSeq++
	cfg := &x.srv.cfg
	if len(x.queue) >= maxQueuedFrames && !cfg.RecvBackpressure {
		x.stallLocked()
		go x.kill()
		if reserved {
			x.srv.recvTotal.Add(-heldSize(body))
		}
		return recvGone
	}
	n, held := body.n, heldSize(body)
	switch {
	case reserved:
		// local.go checked max_recv_queue and took held from max_recv_queue_total.
	case cfg.RecvBackpressure:
		// Never dropped: the gate (Server.Ready) stops new messages for a full queue at
		// their first packet, so what is admitted is held until written.
		x.srv.recvTotal.Add(held)
	default:
		if behind := x.behindLocked(); x.recvFullLocked(held) {
			x.dropLocked(h, n, fmt.Sprintf("%d bytes already queued for this session behind the message being written, api.max_recv_queue = %d",
				behind, cfg.MaxRecvQueue))
			return recvOverflow
		}
		if total, ok := x.srv.reserveRecv(held); !ok {
			x.dropLocked(h, n, fmt.Sprintf("%d bytes queued for all sessions, api.max_recv_queue_total = %d", total, cfg.MaxRecvQueueTotal))
			return recvTotal
		}
	}
	typ := uint8(FrameRecv)
	if x.ring != nil && n >= x.ringMin {
		if n <= x.ring.size {
			typ = FrameRecvAt
		} else {
			x.srv.ringFallback.Add(1) // larger than the ring: over the socket
		}
	}
	if !x.writing && len(x.queue) == 0 && n <= directMax && cfg.DirectWrites {
		ok := false
		if typ == FrameRecvAt {
			ok = x.writeRingDirectLocked(h, body)
		} else {
			ok = x.writeDirectLocked(h, body)
		}
		if ok {
			x.srv.recvTotal.Add(-held)
			return recvQueued
		}
	}
	x.flushHeldLocked()
	x.recvSizes = append(x.recvSizes, held)
	x.recvQueued += held
	if typ == FrameRecvAt {
		x.ringPend++ // its slot is allocated by the writer (toRingLocked)
	}
	x.queue = append(x.queue, outFrame{typ: typ, tag: x.recvSeq, recv: h, body: body, held: held})
	x.cond.Signal()
	return recvQueued
}

// directMax is the largest received message written to an idle client straight from the
// engine's goroutine (writeDirectLocked) rather than handed to the session's writer.
const directMax = 16 << 10

// writeDirectLocked writes a small received message to the client from the caller's
// goroutine when nothing else is queued or being written (so its bytes cannot interleave
// with the writer's, and the writer's buffer is empty): this saves a goroutine hand-off on
// the latency path. The write never blocks: what the socket does not take at once goes
// to the writer as raw bytes; if it takes nothing, false (queue it as usual).
func (x *session) writeDirectLocked(h RecvHeader, body msgBody) bool {
	if !x.rawLocked() {
		return false
	}
	b := AppendHeader(x.takeHeldLocked(x.direct[:0]), Header{Type: FrameRecv, Tag: x.recvSeq, Len: RecvHeaderLen})
	b = h.Append(b)
	b = AppendHeader(b, Header{Type: FrameData, Tag: x.recvSeq, Len: uint32(body.n)})
	off := body.skip
	for _, p := range body.pieces {
		b = append(b, p[min(off, len(p)):]...)
		off = max(off-len(p), 0)
	}
	x.direct = b
	body.release()
	x.writeRawLocked(b)
	return true
}

// writeRingDirectLocked is writeDirectLocked for a session with a receive ring: the
// message is copied into the ring and only its RecvAt frame is written. False when the
// ring has no room now (queue it: the writer waits for releases).
func (x *session) writeRingDirectLocked(h RecvHeader, body msgBody) bool {
	if !x.rawLocked() {
		return false
	}
	r := x.ring
	off, ok := r.alloc(x.recvSeq, body.n)
	if !ok {
		return false
	}
	copyBody(r.mem[off:off+body.n], body)
	body.release()
	r.announce(x.recvSeq)
	x.srv.ringMsgs.Add(1)
	x.srv.ringBytes.Add(uint64(body.n))
	x.writeRecvAtLocked(x.recvSeq, h, off)
	return true
}

// writeRecvAtLocked writes the RecvAt frame of the ring message tagged tag at off
// directly (writeRawLocked: nothing is queued or being written), behind any held frames.
func (x *session) writeRecvAtLocked(tag uint32, h RecvHeader, off int64) {
	b := AppendHeader(x.takeHeldLocked(x.direct[:0]), Header{Type: FrameRecvAt, Tag: tag, Len: RecvAtLen})
	b = RecvAt{RecvHeader: h, Offset: uint64(off)}.Append(b)
	x.direct = b
	x.writeRawLocked(b)
}

// rawLocked reports whether the connection offers non-blocking writes from any goroutine
// (a real socket; not net.Pipe in tests).
func (x *session) rawLocked() bool {
	if x.raw == nil {
		sc, ok := x.conn.(syscall.Conn)
		if !ok {
			return false
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return false
		}
		x.raw = rc
	}
	return true
}

// writeRawLocked writes b to the socket without waiting; what the socket does not take
// goes to the writer as raw bytes. Only when nothing is queued or being written.
func (x *session) writeRawLocked(b []byte) {
	if x.rawWrite == nil { // made once: a closure per write would allocate
		x.rawWrite = func(fd uintptr) bool {
			x.rawN, x.rawErr = rawWrite(fd, x.rawBuf)
			return true // never wait
		}
	}
	x.rawBuf = b
	err := x.raw.Write(x.rawWrite)
	x.rawBuf = nil
	if err == nil {
		err = x.rawErr
	}
	wrote := max(x.rawN, 0)
	if wrote < len(b) {
		// The rest (all of it when the socket is full; on an error the writer meets it too)
		// goes to the writer.
		x.queue = append(x.queue, outFrame{raw: slices.Clone(b[wrote:])})
		x.cond.Signal()
	}
	if wrote > 0 {
		x.directWrites++
		x.touch()
	}
}

// behindLocked is the charge of the received messages queued for the session besides its
// oldest (being written, or next to be): what max_recv_queue bounds.
func (x *session) behindLocked() int64 {
	if x.recvWriting == 0 && len(x.recvSizes) > 0 {
		return x.recvQueued - x.recvSizes[0]
	}
	return x.recvQueued
}

// dropLocked counts a dropped message and queues the drop notice if none is waiting.
func (x *session) dropLocked(h RecvHeader, n int64, reason string) {
	d := &x.dropped
	if d.n == 0 {
		x.queue = append(x.queue, outFrame{typ: FrameError, drops: true})
		x.cond.Signal()
	}
	d.n++
	d.bytes += n
	d.from, d.size, d.reason = h, int(n), reason
}

// dropNoticeLocked is the text of the drop notice for what was dropped since the last one.
func (x *session) dropNoticeLocked() []byte {
	d := x.dropped
	x.dropped = drops{}
	var text string
	if d.n == 1 {
		text = fmt.Sprintf("dropped a message of %d bytes from %v endpoint %d: %s", d.size, d.from.From, d.from.FromEndpoint, d.reason)
	} else {
		text = fmt.Sprintf("dropped %d messages (%d bytes); the last, of %d bytes from %v endpoint %d: %s",
			d.n, d.bytes, d.size, d.from.From, d.from.FromEndpoint, d.reason)
	}
	return AppendError(nil, CodeRecvOverflow, text)
}

// nextLocked takes the next frame off the queue for the writer: a received message's
// bytes move from waiting to being written, the drop notice gets its text.
func (x *session) nextLocked() outFrame {
	f := x.queue[0]
	x.queue[0] = outFrame{}
	x.queue = popFront(x.queue)
	if f.drops {
		f.payload = x.dropNoticeLocked()
	}
	if n := f.held; n > 0 {
		x.recvSizes = popFront(x.recvSizes)
		x.recvQueued -= n
		x.recvWriting += n
	}
	x.writing = true
	return f
}

// doneLocked ends the writing of f: a received message's bytes are released.
func (x *session) doneLocked(f outFrame) {
	x.writing = false
	f.body.release()
	if n := f.held; n > 0 && !x.dead {
		x.recvWriting -= n
		x.srv.recvTotal.Add(-n)
	}
}

// kill ends the session at once: the client is gone or misbehaved.
func (x *session) kill() {
	x.mu.Lock()
	if !x.dead {
		x.dropAllLocked()
	}
	x.mu.Unlock()
	x.conn.Close()
	x.srv.removeSession(x)
	x.failLocal()
	if x.fdr != nil {
		x.fdr.closeAll()
	}
	x.fdMaps.close()
}

// drain writes what is queued, then closes; bounded by ctx.
func (x *session) drain(ctx context.Context) {
	x.mu.Lock()
	x.flushHeldLocked()
	x.draining = true
	x.cond.Broadcast()
	x.mu.Unlock()
	select {
	case <-x.writerDone:
	case <-ctx.Done():
	}
	x.kill()
}

func (x *session) writeLoop() {
	defer x.srv.wg.Done()
	defer close(x.writerDone)
	defer func() { // the writer is the last to touch the ring: unmap it now
		x.mu.Lock()
		x.closeRingLocked()
		x.writerGone = true // no ring may be set up any more: nobody would unmap it
		x.mu.Unlock()
	}()
	bw := bufio.NewWriterSize(deadlineWriter{x}, 64<<10)
	hdr := make([]byte, 0, HeaderLen)
	x.scratch = make([]byte, 0, 128)
	for {
		x.mu.Lock()
		for len(x.queue) == 0 && !x.dead && !x.draining {
			x.cond.Wait()
		}
		if x.dead || len(x.queue) == 0 {
			dead := x.dead // read under x.mu: kill sets it from the reader
			x.mu.Unlock()
			if !dead {
				bw.Flush()
			}
			x.conn.Close()
			return
		}
		f := x.nextLocked()
		var err error
		switch {
		case f.typ == FrameRecvAt && f.placed:
			if x.ring != nil {
				x.ring.announce(f.tag) // the client may release it once it reads this
			}
		case f.typ == FrameRecvAt:
			err = x.toRingLocked(&f, bw.Flush) // waits for room; unlocks to flush and copy
			if err == errRingPlaced {
				f.typ, err = FrameRecv, nil // over the socket, in its turn
				x.srv.ringFallback.Add(1)
			}
		}
		x.mu.Unlock()

		if err == nil {
			err = x.writeFrame(bw, hdr, f)
		}
		if err == nil && x.queueEmpty() {
			err = bw.Flush()
		}
		x.mu.Lock()
		x.doneLocked(f)
		x.mu.Unlock()
		x.admitLocal() // room for local messages waiting for this session (local.go)
		x.touch()
		if err != nil {
			if errors.Is(err, errRingStalled) {
				x.srv.stalled.Add(1)
				x.srv.log.Warn("api client released no receive-ring space for api.write_timeout; disconnecting it", "session", x.id,
					"write_timeout", x.srv.cfg.WriteTimeout)
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				x.srv.stalled.Add(1)
				x.srv.log.Warn("api client took no bytes for api.write_timeout; disconnecting it", "session", x.id,
					"write_timeout", x.srv.cfg.WriteTimeout)
			}
			x.kill()
			return
		}
	}
}

// deadlineWriter gives every write to the client write_timeout to make progress (none
// under back-pressure: session.writeDeadline).
type deadlineWriter struct{ x *session }

// Write implements io.Writer.
func (w deadlineWriter) Write(p []byte) (int, error) {
	w.x.conn.SetWriteDeadline(w.x.writeDeadline())
	return w.x.conn.Write(p)
}

func (x *session) queueEmpty() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.queue) == 0
}

// largeBody is the body size from which Data frames are written with writev straight
// from the message's pieces rather than through the session's write buffer.
const largeBody = 64 << 10

// writeFrame writes f and, for a message, its Data frames: a small body through bw, a
// large one with one writev per frame straight from the message's pieces.
func (x *session) writeFrame(bw *bufio.Writer, hdr []byte, f outFrame) error {
	if f.raw != nil {
		_, err := bw.Write(f.raw)
		return err
	}
	payload := f.payload
	switch f.typ {
	case FrameRecv:
		payload = f.recv.Append(x.scratch[:0])
	case FrameRecvAt:
		payload = RecvAt{RecvHeader: f.recv, Offset: uint64(f.ringOff)}.Append(x.scratch[:0])
	case FrameSent:
		payload = f.sent.Append(x.scratch[:0])
	}
	if f.fd != nil {
		if err := bw.Flush(); err != nil {
			f.fd.Close()
			return err
		}
		return x.writeWithFD(append(AppendHeader(hdr[:0], Header{Type: f.typ, Tag: f.tag, Len: uint32(len(payload))}), payload...), f.fd)
	}
	if _, err := bw.Write(AppendHeader(hdr[:0], Header{Type: f.typ, Tag: f.tag, Len: uint32(len(payload))})); err != nil {
		return err
	}
	if _, err := bw.Write(payload); err != nil {
		return err
	}
	if f.typ == FrameRecvAt {
		return nil // the body is in the ring
	}
	b := f.body
	if b.n == 0 {
		return nil
	}
	large := b.n >= largeBody
	if large {
		if err := bw.Flush(); err != nil {
			return err
		}
	}
	p, off := 0, b.skip // the next byte: pieces[p][off]
	for left := b.n; left > 0; {
		n := min(left, MaxPayload)
		left -= n
		h := AppendHeader(hdr[:0], Header{Type: FrameData, Tag: f.tag, Len: uint32(n)})
		iov := append(x.iov[:0], h)
		for n > 0 {
			for off == len(b.pieces[p]) {
				p, off = p+1, 0
			}
			k := min(int64(len(b.pieces[p])-off), n)
			iov = append(iov, b.pieces[p][off:off+int(k)])
			off += int(k)
			n -= k
		}
		x.iov = iov
		if !large {
			for _, v := range iov {
				if _, err := bw.Write(v); err != nil {
					return err
				}
			}
			continue
		}
		x.conn.SetWriteDeadline(x.writeDeadline())
		x.bufs = iov // a field, not a local: WriteTo's receiver would escape per frame
		_, err := x.bufs.WriteTo(x.conn)
		x.bufs = nil
		if err != nil {
			return err
		}
	}
	return nil
}

// errProtocol ends a session whose client broke the framing.
type errProtocol struct{ err error }

// Error implements error.
func (e errProtocol) Error() string { return e.err.Error() }

// errTimeout ends a session whose client stalled in the middle of a frame or message.
type errTimeout struct{}

// Error implements error.
func (errTimeout) Error() string { return "frame not finished within api.read_timeout" }

// errEvicted ends the reader of a session evicted while it waited.
var errEvicted = errors.New("session evicted")

func (x *session) readLoop() {
	defer x.srv.wg.Done()
	err := x.serve()
	x.state.CompareAndSwap(stateWaiting, stateBusy) // not evictable while it closes
	var pe errProtocol
	switch {
	case errors.Is(err, errEvicted):
		return // evict closes it
	case errors.As(err, &pe):
		x.srv.protocolErrors.Add(1)
		x.srv.log.Warn("api client broke the protocol", "session", x.id, "err", pe.err)
		x.closeWith(CodeProtocol, pe.err.Error()) // tell the client why, then close
	case errors.As(err, new(errTimeout)):
		x.srv.readTimeouts.Add(1)
		x.srv.log.Warn("api client stalled in the middle of a frame; disconnecting it", "session", x.id,
			"read_timeout", x.srv.cfg.ReadTimeout)
		x.closeWith(CodeClosed, fmt.Sprintf("session closed: a frame or message not finished within api.read_timeout (%v)", x.srv.cfg.ReadTimeout))
	default:
		x.kill()
	}
}

// closeWith sends an Error frame (tag 0), writes what is queued (bounded by write_timeout)
// and closes the session.
func (x *session) closeWith(code uint16, text string) {
	x.enqueueError(0, code, text)
	ctx, cancel := context.WithTimeout(x.srv.stop, time.Duration(x.srv.cfg.WriteTimeout))
	defer cancel()
	x.drain(ctx)
}

// frameBuffered reports whether the next frame, header and payload, is already in the
// session's read buffer: reading it cannot block, so it needs no read deadline.
func (x *session) frameBuffered() bool {
	n := x.br.Buffered()
	if n < HeaderLen {
		return false
	}
	h, err := x.br.Peek(HeaderLen)
	return err == nil && int64(n) >= HeaderLen+int64(binary.BigEndian.Uint32(h[8:]))
}

// beginFrame arms read_timeout for the frame about to be read.
func (x *session) beginFrame() {
	x.deadline = true
	x.conn.SetReadDeadline(time.Now().Add(time.Duration(x.srv.cfg.ReadTimeout)))
}

// readFull reads len(p) bytes of the current frame.
func (x *session) readFull(p []byte) error {
	return readErr(x.br.ReadFull(p))
}

// readErr turns a read deadline into errTimeout.
func readErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return errTimeout{}
	}
	return err
}

// flushHeld has the engine write the messages handed to it with SendHeld, then writes
// the Accepted frames held for them.
func (x *session) flushHeld() {
	if x.engineHeld {
		x.engineHeld = false
		x.srv.node.FlushHeld()
	}
	if x.accHeld {
		x.accHeld = false
		x.mu.Lock()
		x.flushHeldLocked()
		x.mu.Unlock()
	}
}

// waitRequest waits, without a deadline, for the first byte of the client's next request
// and marks the session busy; it fails with errEvicted if the session was evicted.
func (x *session) waitRequest() error {
	if x.frameBuffered() {
		// The whole next frame is here already (it came in the same write as the last
		// one, as a client's batched releases come with its Send): nothing to wait for,
		// so no deadline to clear and set again (each costs the runtime a timer change).
		x.touch()
		return nil
	}
	if x.deadline {
		x.conn.SetReadDeadline(time.Time{})
		x.deadline = false
	}
	x.state.CompareAndSwap(stateBusy, stateWaiting)
	x.touch()
	if _, err := x.br.Peek(1); err != nil {
		return err
	}
	if !x.state.CompareAndSwap(stateWaiting, stateBusy) {
		return errEvicted
	}
	x.touch()
	if !x.frameBuffered() {
		// A frame that came whole in one write (a small Send and its Data do) cannot
		// stall: no deadline to set now and clear before the next request.
		x.beginFrame()
	}
	return nil
}

// clientFrame reports whether h is a frame a client may send in this session's protocol
// version (Cancel, empty, only in version 2).
func (x *session) clientFrame(h Header) bool {
	switch h.Type {
	case FrameBind, FrameSend, FrameSendFD, FrameRecvRing, FrameRelease, FrameWantSent:
		return true
	case apitypes.FrameCancel:
		return x.version >= 2 && h.Len == 0
	case apitypes.FrameDirect:
		return x.directOK && h.Len == apitypes.DirectReqLen
	}
	return false
}

func (x *session) serve() error {
	defer x.flushHeld()
	var hb [HeaderLen]byte
	var pl [4 * apitypes.MaxReleaseTags]byte
	for {
		if (x.engineHeld || x.accHeld) && !x.frameBuffered() {
			x.flushHeld() // the burst is read: its messages go out now
		}
		if err := x.waitRequest(); err != nil {
			return err
		}
		if err := x.readFull(hb[:]); err != nil {
			return err
		}
		h, err := ParseHeader(hb[:])
		if err != nil {
			return errProtocol{err}
		}
		if int(h.Len) > len(pl) || !x.clientFrame(h) {
			return errProtocol{fmt.Errorf("unexpected frame type 0x%02x (length %d) from a client", h.Type, h.Len)}
		}
		p := pl[:h.Len]
		if err := x.readFull(p); err != nil {
			return err
		}
		switch h.Type {
		case FrameBind:
			ep, err := ParseEndpoint(p)
			if err != nil {
				return errProtocol{err}
			}
			got, err := x.srv.bind(x, ep)
			if err != nil {
				x.enqueueError(h.Tag, CodeBound, err.Error())
				continue
			}
			x.enqueue(outFrame{typ: FrameBound, tag: h.Tag, payload: AppendEndpointPayload(got)})
		case FrameSend:
			sh, err := ParseSendHeader(p)
			if err != nil && !errors.Is(err, ErrDestination) {
				return errProtocol{err}
			}
			if err := x.handleSend(h.Tag, sh, err); err != nil {
				return err
			}
		case FrameSendFD:
			sh, err := ParseSendHeader(p)
			if err != nil && !errors.Is(err, ErrDestination) {
				return errProtocol{err}
			}
			if x.fdr == nil {
				return errProtocol{errors.New("SendFD needs a Unix socket connection")}
			}
			fd, ferr := x.fdr.take()
			if ferr != nil {
				return errProtocol{ferr}
			}
			x.handleSendFD(h.Tag, sh, err, fd)
		case FrameRecvRing:
			size, least, err := apitypes.ParseRecvRing(p)
			if err != nil {
				return errProtocol{err}
			}
			if x.fdr == nil {
				return errProtocol{errors.New("RecvRing needs a Unix socket connection")}
			}
			fd, ferr := x.fdr.take()
			if ferr != nil {
				return errProtocol{ferr}
			}
			x.handleRecvRing(h.Tag, size, least, fd)
		case FrameRelease:
			if err := x.handleRelease(p); err != nil {
				return err
			}
		case FrameWantSent:
			x.wantSent(h.Tag)
		case apitypes.FrameCancel:
			x.cancel(h.Tag)
		case apitypes.FrameDirect:
			if to, ep, err := apitypes.ParseDirectReq(p); err == nil {
				x.handleDirect(h.Tag, to, ep)
			} else { // a destination nobody is at: its messages are refused one by one
				x.enqueue(outFrame{typ: apitypes.FrameDirectOK, tag: h.Tag, payload: apitypes.AppendDirectOK(nil, apitypes.DirectRelay, 0)})
			}
		}
	}
}

// maxMessage is the largest message body a client may send.
func (x *session) maxMessage() int64 {
	return min(x.srv.cfg.MaxMessage, int64(x.srv.node.Config().MaxMessage-envelopeLen))
}

// refusal is why a Send is refused before its message is read: an Error frame's code and text.
type refusal struct {
	code uint16
	text string
}

// admit checks a Send against the session and the daemon (bound, destination, size,
// shutting down, outstanding bytes) and, when it is admitted, reserves its bytes in
// max_outstanding and max_outstanding_total. It returns the session's endpoint.
func (x *session) admit(sh SendHeader, destErr error) (uint32, *refusal) {
	s := x.srv
	s.mu.Lock()
	ep := x.endpoint
	s.mu.Unlock()
	limit := x.maxMessage()
	switch {
	case ep == 0:
		return 0, &refusal{CodeNotBound, "send before bind: bind an endpoint first"}
	case destErr != nil:
		s.badDestination.Add(1)
		return 0, &refusal{CodeDestination, destErr.Error() + "; this message is refused, the session goes on"}
	case sh.Size == 0 || sh.Size > uint64(limit):
		return 0, &refusal{CodeTooLarge, fmt.Sprintf("message of %d bytes: api.max_message allows 1..%d bytes", sh.Size, limit)}
	case s.closing.Load():
		return 0, &refusal{CodeShuttingDown, "daemon is shutting down; no new messages accepted"}
	}
	size := int64(sh.Size)
	if out := x.outstanding.Add(size); out > s.cfg.MaxOutstanding {
		x.outstanding.Add(-size)
		s.outstandingRefused.Add(1)
		return 0, &refusal{CodeOutstanding, fmt.Sprintf("message of %d bytes would make %d bytes outstanding: api.max_outstanding = %d (wait for completions)",
			size, out, s.cfg.MaxOutstanding)}
	}
	if out := s.outTotal.Add(size); out > s.cfg.MaxOutstandingTotal {
		s.outTotal.Add(-size)
		x.outstanding.Add(-size)
		s.outstandingRefusedTotal.Add(1)
		return 0, &refusal{CodeOutstanding, fmt.Sprintf("message of %d bytes would make %d bytes outstanding over all sessions: api.max_outstanding_total = %d (try again later)",
			size, out, s.cfg.MaxOutstandingTotal)}
	}
	return ep, nil
}

// release returns the bytes of a message that completed, failed or was not sent.
func (x *session) release(size int64) {
	x.outstanding.Add(-size)
	x.srv.outTotal.Add(-size)
}

// handleSend reads a message and hands it to the engine. A refused message gets an Error
// frame with its tag and its Data frames are read and discarded: only a broken framing
// or a stalled client ends the session.
func (x *session) handleSend(tag uint32, sh SendHeader, destErr error) error {
	s := x.srv
	ep, r := x.admit(sh, destErr)
	if r != nil {
		s.msgsRejected.Add(1)
		x.enqueueError(tag, r.code, r.text)
		return x.readBody(tag, nil, int64(sh.Size)) // the client streams the body anyway: skip it
	}
	size := int64(sh.Size)
	m := getSendMsg(x, tag, envelopeLen+int(size))
	putEnvelope(m.buf, sh.Endpoint, ep)
	if err := x.readBody(tag, m.buf[envelopeLen:], size); err != nil {
		m.put()
		x.release(size)
		if !errors.As(err, new(errProtocol)) && !errors.As(err, new(errTimeout)) {
			s.vanished.Add(1)
		}
		return err
	}
	dst := s.localDst(sh)
	if dst != nil && s.localWaiting.Load() >= maxLocalWaiting {
		m.put()
		x.release(size)
		s.msgsRejected.Add(1)
		s.outstandingRefusedTotal.Add(1)
		x.enqueueError(tag, CodeOutstanding, fmt.Sprintf("%d local messages wait for room at their receivers (the daemon's bound); try again later", maxLocalWaiting))
		return nil
	}
	x.accept(tag, false) // in front of its Sent or Failed frame, whoever writes that
	if dst != nil {
		x.sendLocal(m, sh, ep, dst)
		return nil
	}
	// Counted before its first packet: its Sent may reach the client before SendTo returns.
	s.countAccepted(size, false)
	x.track(tag, m, nil)
	// More frames came with this one (a batch): the engine sends this message's first
	// packets with the burst's, at the FlushHeld when the burst is read.
	held := x.br.direct && x.frameBuffered()
	h, err := s.node.SendTo(sh.To, m.buf, m.done, !held)
	if held {
		x.engineHeld = true
	} else {
		x.flushHeld()
	}
	if err == nil {
		x.setHandle(tag, m, h)
	}
	if err != nil {
		s.uncountAccepted(size, false)
		x.refused(tag, m, size, err)
		m.put()
		return nil
	}
	return nil
}

// countAccepted counts a message the daemon took (fd: through a memfd); uncountAccepted
// takes it back when the node refused it after all (it is counted rejected instead).
func (s *Server) countAccepted(size int64, fd bool) {
	s.msgsAccepted.Add(1)
	s.bytesAccepted.Add(uint64(size))
	if fd {
		s.fdMsgs.Add(1)
	}
}

func (s *Server) uncountAccepted(size int64, fd bool) {
	s.msgsAccepted.Add(^uint64(0))
	s.bytesAccepted.Add(^uint64(size - 1))
	if fd {
		s.fdMsgs.Add(^uint64(0))
	}
}

// smallMsg is the largest message buffer a sendMsg keeps for the next message; larger
// ones come from bufpool.
const smallMsg = 64 << 10

// sendMsg is a message a session handed to the engine: its buffer and what its completion
// needs. sendMsgs recycles them (and the buffers of small messages with them), so that
// handing a message to the engine allocates nothing in the API.
type sendMsg struct {
	x     *session
	tag   uint32
	buf   []byte                  // envelope and body, what the engine sends
	own   []byte                  // the buffer kept for small messages
	piece [1][]byte               // buf as the pieces of a local message's body (local.go)
	done  func(daemon.SendResult) // m.complete, made once
}

var sendMsgs sync.Pool

// getSendMsg returns a sendMsg with a buffer of n bytes.
func getSendMsg(x *session, tag uint32, n int) *sendMsg {
	m, _ := sendMsgs.Get().(*sendMsg)
	if m == nil {
		m = &sendMsg{}
		m.done = m.complete
	}
	m.x, m.tag = x, tag
	if n > smallMsg {
		m.buf = bufpool.Get(n)
		return m
	}
	if cap(m.own) < n {
		m.own = make([]byte, n, max(n, 512))
	}
	m.buf = m.own[:n]
	return m
}

// put gives m and its buffer back.
func (m *sendMsg) put() {
	if len(m.buf) > smallMsg {
		bufpool.Put(m.buf)
	}
	m.x, m.buf, m.piece[0] = nil, nil, nil
	sendMsgs.Put(m)
}

// complete is the engine's completion of the message: the engine is done with its buffer.
func (m *sendMsg) complete(r daemon.SendResult) {
	x, tag, size := m.x, m.tag, int64(len(m.buf)-envelopeLen)
	m.put()
	x.release(size)
	x.completed(tag, m, r)
}

// refused answers a message the engine refused after it was read: an Error frame
// (version 1), or, in version 2, where its Accepted frame went out already, its Failed
// frame. The caller gives m back.
func (x *session) refused(tag uint32, m *sendMsg, size int64, err error) {
	x.release(size)
	x.srv.msgsRejected.Add(1)
	if x.version >= 2 {
		x.completed(tag, m, daemon.SendResult{Err: err})
		return
	}
	x.enqueueError(tag, sendErrCode(err), err.Error())
}

// completed queues a message's Sent or Failed frame; m (its buffer, possibly recycled
// already: only compared) identifies it among the session's outstanding messages.
func (x *session) completed(tag uint32, m *sendMsg, r daemon.SendResult) {
	x.mu.Lock()
	if x.tags != nil {
		x.untrackLocked(tag, m) // with the frame: a Cancel sees either both or neither
	}
	if r.Err != nil {
		stalled := x.enqueueLocked(outFrame{typ: FrameFailed, tag: tag, payload: []byte(r.Err.Error())})
		x.mu.Unlock()
		if stalled {
			go x.kill()
		}
		return
	}
	info := SentInfo{Elapsed: time.Duration(r.Elapsed), SRTT: time.Duration(r.SRTT), Window: int64(r.Window), Retransmit: r.Retransmit}
	if !x.dead && x.lazySent {
		var f [HeaderLen + SentInfoLen]byte
		if x.holdSentLocked(tag, info.Append(AppendHeader(f[:0], Header{Type: FrameSent, Tag: tag, Len: SentInfoLen}))) {
			x.mu.Unlock()
			return
		}
	}
	if !x.dead && x.srv.cfg.DirectWrites && !x.writing && len(x.queue) == 0 && x.rawLocked() {
		// Written from the engine's goroutine like a small received message
		// (writeDirectLocked): no wake-up of the session's writer per message.
		b := AppendHeader(x.takeHeldLocked(x.direct[:0]), Header{Type: FrameSent, Tag: tag, Len: SentInfoLen})
		x.direct = info.Append(b)
		x.writeRawLocked(x.direct)
		x.mu.Unlock()
		return
	}
	x.mu.Unlock()
	x.enqueue(outFrame{typ: FrameSent, tag: tag, sent: info})
}

func sendErrCode(err error) uint16 {
	if errors.Is(err, daemon.ErrShuttingDown) || errors.Is(err, daemon.ErrStopped) {
		return CodeShuttingDown
	}
	return CodeSend
}

// readBody reads size bytes of Data frames tagged tag into dst (nil: discard them). Each
// Data frame must arrive whole within read_timeout of the previous one.
func (x *session) readBody(tag uint32, dst []byte, size int64) error {
	hb := x.bodyHdr[:]
	for off := int64(0); off < size; {
		if !x.frameBuffered() {
			x.flushHeld() // messages of the burst before this one go out while we wait
			x.beginFrame()
		}
		if err := x.readFull(hb); err != nil {
			return err
		}
		h, err := ParseHeader(hb)
		if err != nil {
			return errProtocol{err}
		}
		if h.Type != FrameData || h.Tag != tag || h.Len == 0 || int64(h.Len) > size-off {
			return errProtocol{fmt.Errorf("expected a Data frame of message %d with at most %d bytes, got type 0x%02x tag %d length %d",
				tag, size-off, h.Type, h.Tag, h.Len)}
		}
		end := off + int64(h.Len)
		if dst == nil {
			if err := x.br.Discard(int64(h.Len)); err != nil {
				return readErr(err)
			}
		} else {
			// Straight into the message's buffer (frameReader). When more of the message
			// follows, only the next Data frame's header is read with this payload, so that
			// its payload goes straight into the buffer too.
			tail := len(x.br.buf)
			if end < size {
				tail = HeaderLen
			}
			if err := readErr(x.br.readFull(dst[off:end], tail)); err != nil {
				return err
			}
		}
		off = end
	}
	return nil
}

// popFront drops q's first element. The emptied queue keeps its storage, so a queue that
// empties between messages does not allocate per message.
func popFront[T any](q []T) []T {
	if len(q) == 1 {
		return q[:0]
	}
	return q[1:]
}
