package api

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"smartt/transport/daemon"
)

// outFrame is a frame queued for a client; data, if set, follows as Data frames.
type outFrame struct {
	typ     uint8
	tag     uint32
	payload []byte
	data    []byte
}

// session is one client's messaging connection.
type session struct {
	srv     *Server
	id      uint64
	conn    net.Conn
	br      *bufio.Reader
	cred    *PeerCred
	started time.Time

	endpoint    uint32 // guarded by srv.mu
	outstanding atomic.Int64

	mu         sync.Mutex
	cond       *sync.Cond
	queue      []outFrame
	recvQueued int64
	dead       bool // the client is gone: drop everything
	draining   bool // write what is queued, then close
	writerDone chan struct{}
	recvSeq    uint32
	fdr        *fdReader // descriptors passed by the client (nil when not a Unix socket)
}

func newSession(s *Server, id uint64, conn net.Conn, br *bufio.Reader) *session {
	x := &session{srv: s, id: id, conn: conn, br: br, started: time.Now(), writerDone: make(chan struct{})}
	if uc, ok := conn.(*net.UnixConn); ok {
		// Read through an fdReader so descriptors passed with SendFD frames are kept; bytes
		// the HTTP server buffered already come first.
		x.fdr = newFDReader(uc)
		ahead, _ := br.Peek(br.Buffered())
		x.br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(bytes.Clone(ahead)), x.fdr), 64<<10)
	}
	x.cond = sync.NewCond(&x.mu)
	return x
}

func (x *session) info() SessionInfo {
	x.mu.Lock()
	q := x.recvQueued
	x.mu.Unlock()
	return SessionInfo{ID: x.id, Cred: x.cred, Endpoint: x.endpoint, Started: x.started,
		Outstanding: x.outstanding.Load(), RecvQueued: q}
}

// maxQueuedFrames bounds the frames waiting for a client: one that stops reading while it
// keeps sending (completions pile up) is disconnected instead of growing the daemon.
var maxQueuedFrames = 1 << 16

// enqueue queues f unless the client is gone.
func (x *session) enqueue(f outFrame) {
	x.mu.Lock()
	stalled := false
	if !x.dead {
		if len(x.queue) >= maxQueuedFrames {
			stalled = x.stallLocked()
		} else {
			x.queue = append(x.queue, f)
			x.cond.Signal()
		}
	}
	x.mu.Unlock()
	if stalled {
		go x.kill() // not here: callers may hold locks kill takes
	}
}

// stallLocked marks a client that does not read its frames as gone.
func (x *session) stallLocked() bool {
	x.dead = true
	x.queue = nil
	x.recvQueued = 0
	x.cond.Broadcast()
	x.srv.stalled.Add(1)
	x.srv.log.Warn("api client stopped reading; disconnecting it", "session", x.id, "queued_frames", maxQueuedFrames)
	return true
}

func (x *session) enqueueError(tag uint32, code uint16, text string) {
	x.enqueue(outFrame{typ: FrameError, tag: tag, payload: AppendError(nil, code, text)})
}

// enqueueRecv queues a received message unless that would exceed max_recv_queue (then
// the client gets an Error frame instead).
func (x *session) enqueueRecv(h RecvHeader, body []byte) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.dead {
		return false
	}
	x.recvSeq++
	if len(x.queue) >= maxQueuedFrames {
		x.stallLocked()
		go x.kill()
		return false
	}
	if x.recvQueued+int64(len(body)) > x.srv.cfg.MaxRecvQueue {
		x.queue = append(x.queue, outFrame{typ: FrameError, tag: 0, payload: AppendError(nil, CodeRecvOverflow,
			fmt.Sprintf("dropped a message of %d bytes from %v endpoint %d: %d bytes already queued, api.max_recv_queue = %d",
				len(body), h.From, h.FromEndpoint, x.recvQueued, x.srv.cfg.MaxRecvQueue))})
		x.cond.Signal()
		return false
	}
	x.recvQueued += int64(len(body))
	x.queue = append(x.queue, outFrame{typ: FrameRecv, tag: x.recvSeq, payload: h.Append(nil), data: body})
	x.cond.Signal()
	return true
}

// kill ends the session at once: the client is gone or misbehaved.
func (x *session) kill() {
	x.mu.Lock()
	x.dead = true
	x.queue = nil
	x.recvQueued = 0
	x.cond.Broadcast()
	x.mu.Unlock()
	x.conn.Close()
	x.srv.removeSession(x)
	if x.fdr != nil {
		x.fdr.closeAll()
	}
}

// drain writes what is queued, then closes; bounded by ctx.
func (x *session) drain(ctx context.Context) {
	x.mu.Lock()
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
	bw := bufio.NewWriterSize(x.conn, 64<<10)
	hdr := make([]byte, 0, HeaderLen)
	for {
		x.mu.Lock()
		for len(x.queue) == 0 && !x.dead && !x.draining {
			x.cond.Wait()
		}
		if x.dead || len(x.queue) == 0 {
			x.mu.Unlock()
			if !x.dead {
				bw.Flush()
			}
			x.conn.Close()
			return
		}
		f := x.queue[0]
		x.queue[0] = outFrame{}
		x.queue = x.queue[1:]
		x.mu.Unlock()

		err := writeFrame(bw, hdr, f)
		if f.data != nil {
			x.mu.Lock()
			x.recvQueued -= int64(len(f.data))
			x.mu.Unlock()
		}
		if err == nil && x.queueEmpty() {
			err = bw.Flush()
		}
		if err != nil {
			x.kill()
			return
		}
	}
}

func (x *session) queueEmpty() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.queue) == 0
}

// writeFrame writes f and, for a message, its Data frames straight from the message buffer.
func writeFrame(w *bufio.Writer, hdr []byte, f outFrame) error {
	if _, err := w.Write(AppendHeader(hdr[:0], Header{Type: f.typ, Tag: f.tag, Len: uint32(len(f.payload))})); err != nil {
		return err
	}
	if _, err := w.Write(f.payload); err != nil {
		return err
	}
	for off := 0; off < len(f.data); {
		n := min(len(f.data)-off, MaxPayload)
		if _, err := w.Write(AppendHeader(hdr[:0], Header{Type: FrameData, Tag: f.tag, Len: uint32(n)})); err != nil {
			return err
		}
		if _, err := w.Write(f.data[off : off+n]); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// errProtocol ends a session whose client broke the framing.
type errProtocol struct{ err error }

// Error implements error.
func (e errProtocol) Error() string { return e.err.Error() }

func (x *session) readLoop() {
	defer x.srv.wg.Done()
	err := x.serve()
	var pe errProtocol
	if errors.As(err, &pe) {
		x.srv.protocolErrors.Add(1)
		x.srv.log.Warn("api client broke the protocol", "session", x.id, "err", pe.err)
		// Tell the client why, then close.
		x.enqueueError(0, CodeProtocol, pe.err.Error())
		x.drain(context.Background())
		return
	}
	x.kill()
}

func (x *session) serve() error {
	var hb [HeaderLen]byte
	var pl [64]byte
	for {
		if _, err := io.ReadFull(x.br, hb[:]); err != nil {
			return err
		}
		h, err := ParseHeader(hb[:])
		if err != nil {
			return errProtocol{err}
		}
		if int(h.Len) > len(pl) || (h.Type != FrameBind && h.Type != FrameSend && h.Type != FrameSendFD) {
			return errProtocol{fmt.Errorf("unexpected frame type 0x%02x (length %d) from a client", h.Type, h.Len)}
		}
		p := pl[:h.Len]
		if _, err := io.ReadFull(x.br, p); err != nil {
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
			if err != nil {
				return errProtocol{err}
			}
			if err := x.handleSend(h.Tag, sh); err != nil {
				return err
			}
		case FrameSendFD:
			sh, err := ParseSendHeader(p)
			if err != nil {
				return errProtocol{err}
			}
			if x.fdr == nil {
				return errProtocol{errors.New("SendFD needs a Unix socket connection")}
			}
			fd, err := x.fdr.take()
			if err != nil {
				return errProtocol{err}
			}
			x.handleSendFD(h.Tag, sh, fd)
		}
	}
}

// AppendEndpointPayload encodes a Bind or Bound payload.
func AppendEndpointPayload(ep uint32) []byte {
	return []byte{byte(ep >> 24), byte(ep >> 16), byte(ep >> 8), byte(ep)}
}

// maxMessage is the largest message body a client may send.
func (x *session) maxMessage() int64 {
	return min(x.srv.cfg.MaxMessage, int64(x.srv.node.Config().MaxMessage-envelopeLen))
}

func (x *session) handleSend(tag uint32, sh SendHeader) error {
	s := x.srv
	reject := func(code uint16, format string, a ...any) error {
		s.msgsRejected.Add(1)
		x.enqueueError(tag, code, fmt.Sprintf(format, a...))
		return x.readBody(tag, nil, int64(sh.Size)) // the client streams the body anyway: skip it
	}
	x.srv.mu.Lock()
	ep := x.endpoint
	x.srv.mu.Unlock()
	limit := x.maxMessage()
	switch {
	case ep == 0:
		return reject(CodeNotBound, "send before bind: bind an endpoint first")
	case sh.Size == 0 || sh.Size > uint64(limit):
		return reject(CodeTooLarge, "message of %d bytes: api.max_message allows 1..%d bytes", sh.Size, limit)
	case s.closing.Load():
		return reject(CodeShuttingDown, "daemon is shutting down; no new messages accepted")
	}
	size := int64(sh.Size)
	if out := x.outstanding.Add(size); out > s.cfg.MaxOutstanding {
		x.outstanding.Add(-size)
		return reject(CodeOutstanding, "message of %d bytes would make %d bytes outstanding: api.max_outstanding = %d (wait for completions)",
			size, out, s.cfg.MaxOutstanding)
	}
	buf := make([]byte, envelopeLen+size)
	putEnvelope(buf, sh.Endpoint, ep)
	if err := x.readBody(tag, buf[envelopeLen:], size); err != nil {
		x.outstanding.Add(-size)
		if !errors.As(err, new(errProtocol)) {
			s.vanished.Add(1)
		}
		return err
	}
	err := s.node.Send(sh.To, buf, func(r daemon.SendResult) {
		x.outstanding.Add(-size)
		x.completed(tag, r)
	})
	if err != nil {
		x.outstanding.Add(-size)
		s.msgsRejected.Add(1)
		x.enqueueError(tag, sendErrCode(err), err.Error())
		return nil
	}
	s.msgsAccepted.Add(1)
	s.bytesAccepted.Add(uint64(size))
	return nil
}

// completed queues a message's Sent or Failed frame.
func (x *session) completed(tag uint32, r daemon.SendResult) {
	if r.Err != nil {
		x.enqueue(outFrame{typ: FrameFailed, tag: tag, payload: []byte(r.Err.Error())})
		return
	}
	x.enqueue(outFrame{typ: FrameSent, tag: tag, payload: SentInfo{Elapsed: r.Elapsed, SRTT: r.SRTT,
		Window: int64(r.Window), Retransmit: r.Retransmit}.Append(nil)})
}

func sendErrCode(err error) uint16 {
	if errors.Is(err, daemon.ErrShuttingDown) || errors.Is(err, daemon.ErrStopped) {
		return CodeShuttingDown
	}
	return CodeSend
}

// readBody reads size bytes of Data frames tagged tag into dst (nil: discard them).
func (x *session) readBody(tag uint32, dst []byte, size int64) error {
	var hb [HeaderLen]byte
	for off := int64(0); off < size; {
		if _, err := io.ReadFull(x.br, hb[:]); err != nil {
			return err
		}
		h, err := ParseHeader(hb[:])
		if err != nil {
			return errProtocol{err}
		}
		if h.Type != FrameData || h.Tag != tag || h.Len == 0 || int64(h.Len) > size-off {
			return errProtocol{fmt.Errorf("expected a Data frame of message %d with at most %d bytes, got type 0x%02x tag %d length %d",
				tag, size-off, h.Type, h.Tag, h.Len)}
		}
		if dst == nil {
			if _, err := io.CopyN(io.Discard, x.br, int64(h.Len)); err != nil {
				return err
			}
		} else if _, err := io.ReadFull(x.br, dst[off:off+int64(h.Len)]); err != nil {
			return err
		}
		off += int64(h.Len)
	}
	return nil
}
