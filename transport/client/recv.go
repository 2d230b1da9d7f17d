package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/smartt-transport/smartt/transport/apitypes"
	"github.com/smartt-transport/smartt/transport/bufpool"
)

// The receive side: who reads the session's socket.
//
// There is no dedicated reader goroutine. Whichever goroutine waits on the session (a Recv
// for the next message, a Wait or Bind for its reply) and finds the socket unread takes
// the read token and reads frames itself, handing what is not its own to the others
// (messages through the receive queue, replies through their waiters' channels) until it
// has what it waits for; then it gives the token back, and the next waiter (if any) takes
// it. So a Recv that waits alone is woken by the daemon's write directly, with no
// goroutine hand-off in between. When nobody waits for idleReadDelay, a timer goroutine
// takes the token and reads (the old reader goroutine's job: replies of messages nobody
// waits for, messages nobody receives yet, the daemon's goodbye), and gives the token to
// the first application goroutine that waits.
//
// The frame parser's state lives in rx, not on the reader's stack, so a reader can stop
// between any two reads (its context ended: the blocked read is interrupted with a read
// deadline) and the next reader resumes mid-frame: no byte is lost or read twice.

// idleReadDelay is how long the socket may go unread while no goroutine waits on the
// session, before a timer goroutine reads it: long enough that a client which answers
// what it receives (Recv, Send, Recv) is always the reader itself.
var idleReadDelay = time.Millisecond

type recvState struct {
	tok     chan struct{} // holds the read token while no goroutine reads
	waiting atomic.Int32  // application goroutines in Recv or a wait for a reply
	closed  chan struct{} // Close was called
	once    sync.Once
	rc      syscall.RawConn // busy polling checks for data without reading

	// The frame parser's state, owned by the token's holder.
	m        *Message    // message being received in Data frames
	w        *sinkWriter // its SetRecvWriter writer
	mtag     uint32
	off      uint64 // bytes of m received
	dataLeft uint32 // bytes of the current Data frame not read yet
	ctl      []byte // a control frame too large for the read buffer, being read
	ctlHdr   apitypes.Header
	pending  *recvItem   // a message read by a reader whose context ended while the queue was full
	received atomic.Bool // a message arrived: the daemon may hold Sent frames (wantSent)

	// Interrupting a blocked read when the reader's context ends.
	dlmu      sync.Mutex
	gen       uint64 // counts token releases: which reader a deadline is for
	dlSet     bool
	leadGen   uint64 // the gen of the reader whose context interrupt watches
	interrupt func() // s.interruptRead, made once (a closure per read would allocate)

	// The idle reader.
	idle       *time.Timer
	idleArmed  atomic.Bool
	lastActive atomic.Int64 // UnixNano of the last application wait's end
}

func (s *Session) initRecv() {
	x := &s.rx
	x.tok = make(chan struct{}, 1)
	x.tok <- struct{}{}
	x.closed = make(chan struct{})
	if sc, ok := s.conn.(syscall.Conn); ok {
		x.rc, _ = sc.SyscallConn()
	}
	x.idleArmed.Store(true)
	x.interrupt = s.interruptRead
	x.idle = time.AfterFunc(0, s.idleRead) // until the first wait: read at once
}

// interruptRead ends the blocked read of the reader whose context ended (leadGen), unless
// that reader has given the token back since.
func (s *Session) interruptRead() {
	x := &s.rx
	x.dlmu.Lock()
	if x.gen == x.leadGen && !x.dlSet {
		x.dlSet = true
		s.conn.SetReadDeadline(time.Unix(1, 0))
	}
	x.dlmu.Unlock()
}

// goal is what a reader waits for.
type goal struct {
	recv  bool       // a Recv: the next message
	ch    chan reply // a reply on ch
	idle  bool       // the idle reader: until an application goroutine waits
	spin  int64      // busy-poll until this UnixNano before blocking in a read (recv)
	close bool       // Close: until the session's end
}

// Recv waits for the next message to this session's endpoint. Messages the daemon had to
// drop (the session's or the daemon's receive queue was full) are reported as an *Error
// (code apitypes.CodeRecvOverflow); the session goes on. When the daemon closes the session
// (apitypes.CodeClosed: idle and evicted for a new client, or a frame stalled) Recv returns
// that *Error once the queued messages are consumed.
func (s *Session) Recv(ctx context.Context) (*Message, error) {
	select {
	case it := <-s.recv:
		return it.msg, it.err
	default:
	}
	s.rx.waiting.Add(1)
	defer s.leave()
	g := goal{recv: true}
	if spin := s.busyPoll.Load(); spin > 0 {
		g.spin = time.Now().UnixNano() + spin
	}
	for {
		tok := s.rx.tok
		if s.dir.in.Load() {
			tok = nil // readDaemon reads the socket: wait on the queue (direct.go)
		}
		select {
		case it := <-s.recv:
			return it.msg, it.err
		case <-tok:
			it, ok, err := s.lead(ctx, g)
			if ok {
				return it.msg, it.err
			}
			if err != nil && ctx.Err() != nil {
				return nil, ctx.Err()
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.done:
			select {
			case it := <-s.recv:
				return it.msg, it.err
			default:
			}
			return nil, s.brokenErr(io.EOF)
		}
	}
}

// wait waits for the reply to tag on ch, reading the socket itself when nobody else does.
func (s *Session) wait(ctx context.Context, tag uint32, ch chan reply) (reply, error) {
	select {
	case r := <-ch:
		return r, r.err
	default:
	}
	s.rx.waiting.Add(1)
	defer s.leave()
	for {
		select {
		case r := <-ch:
			return r, r.err
		case <-s.rx.tok:
			// On a broken session the reply is the error, on ch; on ctx's end the
			// next round returns.
			s.lead(ctx, goal{ch: ch})
		case <-ctx.Done():
			s.unregister(tag)
			return reply{}, ctx.Err()
		}
	}
}

// wantSent tells a daemon that holds Sent frames (apitypes.LazySentHeader) that a
// goroutine waits for message tag's outcome, unless it is here already. The daemon
// holds them only in a session it delivered messages to; a client that has read none
// does not ask (a Sent frame held in the moment between waits at most 1 ms).
func (s *Session) wantSent(tag uint32, ch chan reply) {
	if !s.lazySent || !s.rx.received.Load() || len(ch) > 0 {
		return // the daemon holds Sent frames only once it delivered a message
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	err := s.flushReleasesLocked()
	if err == nil {
		var h [apitypes.HeaderLen]byte
		_, err = s.bw.Write(apitypes.AppendHeader(h[:0], apitypes.Header{Type: apitypes.FrameWantSent, Tag: tag}))
	}
	if err == nil {
		_ = s.bw.Flush() // a broken session reaches the waiter through the reader
	}
}

// leave ends an application goroutine's wait; the last one arms the idle reader.
func (s *Session) leave() {
	if s.rx.waiting.Add(-1) == 0 {
		s.rx.lastActive.Store(time.Now().UnixNano())
		if !s.rx.idleArmed.Load() && s.rx.idleArmed.CompareAndSwap(false, true) {
			s.rx.idle.Reset(idleReadDelay)
		}
	}
}

// idleRead is the idle reader (the timer leave arms): when no application goroutine has
// waited for idleReadDelay and nobody reads, it reads until one waits.
func (s *Session) idleRead() {
	x := &s.rx
	x.idleArmed.Store(false)
	select {
	case <-s.done:
		return
	default:
	}
	if x.waiting.Load() > 0 {
		return // the last to leave re-arms
	}
	if d := time.Duration(x.lastActive.Load() + int64(idleReadDelay) - time.Now().UnixNano()); d > 0 {
		if x.idleArmed.CompareAndSwap(false, true) {
			x.idle.Reset(d)
		}
		return
	}
	select {
	case <-x.tok:
	default:
		return // a waiter reads; it re-arms when it leaves
	}
	s.lead(context.Background(), goal{idle: true})
}

// lead reads frames as the holder of the read token until g is met, then gives the
// token back. It returns the message a Recv waits for (ok), or ctx's error, or the error
// that ended the session (the token then stays taken: nobody reads a broken session).
func (s *Session) lead(ctx context.Context, g goal) (it recvItem, ok bool, err error) {
	x := &s.rx
	if x.pending != nil { // older than anything still unread
		p := *x.pending
		x.pending = nil
		if g.recv {
			s.release()
			return s.behindQueue(p), true, nil
		}
		if err := s.enqueue(ctx, p); err != nil {
			s.release()
			return it, false, err
		}
	}
	if g.recv {
		select {
		case q := <-s.recv:
			s.release()
			return q, true, nil
		default:
		}
	} else if g.ch != nil && len(g.ch) > 0 {
		s.release()
		return it, false, nil
	}
	if ctx.Done() != nil {
		x.dlmu.Lock()
		x.leadGen = x.gen
		x.dlmu.Unlock()
		defer context.AfterFunc(ctx, x.interrupt)()
	}
	for {
		if g.recv && s.dir.in.Load() {
			s.release() // pairs feed the queue too: readDaemon reads from now on (direct.go)
			return it, false, nil
		}
		if s.br.Buffered() == 0 {
			// About to wait for the daemon, which may wait for ring space: give back
			// what is released once it is worth a write (the timer does the rest).
			if p := s.relPend.Load(); p > 0 && p >= s.relEarly.Load() {
				s.flushReleases(false)
			}
			if g.spin != 0 {
				s.spinRead(g.spin)
				g.spin = 0
			}
		}
		m, have, err := s.step()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if ctx.Err() == nil { // a deadline meant for an earlier reader
					x.dlmu.Lock()
					x.dlSet = false
					s.conn.SetReadDeadline(time.Time{})
					x.dlmu.Unlock()
					continue
				}
				s.release()
				return it, false, ctx.Err()
			}
			s.fail(err)
			return it, false, s.brokenErr(err)
		}
		if have {
			if g.recv {
				m = s.behindQueue(m)
				s.release()
				return m, true, nil
			}
			if err := s.enqueue(ctx, m); err != nil {
				s.release()
				return it, false, err
			}
		}
		switch {
		case g.ch != nil && len(g.ch) > 0, g.idle && x.waiting.Load() > 0:
			s.release()
			return it, false, nil
		}
	}
}

// behindQueue returns the oldest queued message and queues m in its place, or m when the
// queue is empty: a Recv reader takes messages in order. Only the token's holder queues
// messages, so the place taken is free.
func (s *Session) behindQueue(m recvItem) recvItem {
	select {
	case q := <-s.recv:
		s.recv <- m
		return q
	default:
		return m
	}
}

// enqueue queues a received message for Recv. When the queue is full it waits for room
// (the old reader goroutine did too: the daemon then holds further messages); a reader
// whose context ends meanwhile leaves it for the next reader.
func (s *Session) enqueue(ctx context.Context, it recvItem) error {
	select {
	case s.recv <- it:
		return nil
	default:
	}
	select {
	case s.recv <- it:
		return nil
	case <-ctx.Done():
		s.rx.pending = &it
		return ctx.Err()
	case <-s.rx.closed:
		if it.msg != nil {
			it.msg.Release()
		}
		return nil
	}
}

// release gives the read token back, clearing a read deadline set for this reader.
func (s *Session) release() {
	x := &s.rx
	x.dlmu.Lock()
	x.gen++
	if x.dlSet {
		x.dlSet = false
		s.conn.SetReadDeadline(time.Time{})
	}
	x.dlmu.Unlock()
	x.tok <- struct{}{}
}

// spinRead busy-polls until data is readable or until (UnixNano), without reading it.
func (s *Session) spinRead(until int64) {
	if s.rx.rc == nil {
		return
	}
	for {
		n := 0
		s.rx.rc.Control(func(fd uintptr) { n = bytesReadable(fd) })
		if n > 0 || time.Now().UnixNano() >= until {
			return
		}
		runtime.Gosched()
	}
}

// fail ends the session after the reader's error err: every waiter gets the error and
// done is closed. The read token stays taken.
func (s *Session) fail(err error) {
	if err == nil {
		err = io.EOF
	}
	s.mu.Lock()
	if s.err == nil {
		s.err = fmt.Errorf("smarttd session ended: %w", err)
	}
	for tag, ch := range s.waiters {
		ch <- reply{err: s.err}
		delete(s.waiters, tag)
	}
	s.mu.Unlock()
	if p := s.rx.pending; p != nil {
		select {
		case s.recv <- *p:
			s.rx.pending = nil
		default:
		}
	}
	close(s.done)
	s.closeDirect()
}

// step reads and handles one frame, or what is readable of a message's Data frame, and
// returns a received message when one is complete. It stops between reads only: after an
// error (a read deadline) the state is consistent and the next step resumes.
func (s *Session) step() (it recvItem, have bool, err error) {
	x := &s.rx
	br := s.br
	if x.dataLeft > 0 { // a message's bytes
		var n int
		if x.w == nil {
			n, err = br.Read(x.m.Data[x.off : x.off+uint64(x.dataLeft)])
		} else {
			if br.Buffered() == 0 {
				_, err = br.Peek(1)
			}
			if err == nil {
				b, _ := br.Peek(min(br.Buffered(), int(x.dataLeft)))
				x.w.Write(b) // only the connection fails here: w swallows its own errors
				n, _ = br.Discard(len(b))
			}
		}
		x.off += uint64(n)
		x.dataLeft -= uint32(n)
		if err != nil || x.dataLeft > 0 || x.off < x.m.Size {
			return it, false, err
		}
		return s.finishMessage(), true, nil
	}
	if x.ctl != nil { // a large control frame
		n, err := br.Read(x.ctl[len(x.ctl):cap(x.ctl)])
		x.ctl = x.ctl[:len(x.ctl)+n]
		if err != nil || len(x.ctl) < cap(x.ctl) {
			return it, false, err
		}
		payload := x.ctl
		x.ctl = nil
		return s.handle(x.ctlHdr, payload)
	}
	hb, err := br.Peek(apitypes.HeaderLen)
	if err != nil {
		return it, false, err
	}
	h, err := apitypes.ParseHeader(hb)
	if err != nil {
		return it, false, err
	}
	if x.m != nil { // the Data frames of the message being received
		if h.Type != apitypes.FrameData || h.Tag != x.mtag || uint64(h.Len) > x.m.Size-x.off || h.Len == 0 {
			return it, false, fmt.Errorf("daemon broke the framing of received message %d", x.mtag)
		}
		br.Discard(apitypes.HeaderLen)
		x.dataLeft = h.Len
		return it, false, nil
	}
	total := apitypes.HeaderLen + int(h.Len)
	if total > br.Size() {
		br.Discard(apitypes.HeaderLen)
		x.ctl, x.ctlHdr = make([]byte, 0, h.Len), h
		return it, false, nil
	}
	fr, err := br.Peek(total)
	if err != nil {
		return it, false, err
	}
	it, have, err = s.handle(h, fr[apitypes.HeaderLen:]) // before the Discard: fr aliases the buffer
	br.Discard(total)
	return it, have, err
}

// finishMessage returns the message whose last byte was read.
func (s *Session) finishMessage() recvItem {
	x := &s.rx
	it := recvItem{msg: x.m}
	if x.w != nil && x.w.err != nil {
		it.err = fmt.Errorf("writing received message: %w", x.w.err)
	}
	x.m, x.w, x.off = nil, nil, 0
	return it
}

// handle handles a whole frame other than Data; payload may alias the read buffer.
func (s *Session) handle(h apitypes.Header, payload []byte) (it recvItem, have bool, err error) {
	switch h.Type {
	case apitypes.FrameRecv:
		rh, err := apitypes.ParseRecvHeader(payload)
		if err != nil {
			return it, false, err
		}
		if rh.Size > 1<<32 {
			return it, false, fmt.Errorf("daemon announced a message of %d bytes", rh.Size)
		}
		m := &Message{From: rh.From, FromEndpoint: rh.FromEndpoint, Endpoint: rh.Endpoint, Size: rh.Size}
		s.rx.received.Store(true)
		s.maybeAutoRing(rh.Size)
		s.mu.Lock()
		sink := s.sink
		s.mu.Unlock()
		x := &s.rx
		x.m, x.mtag, x.off, x.w = m, h.Tag, 0, nil
		if sink != nil {
			x.w = &sinkWriter{w: sink(m)}
		} else {
			m.Data = bufpool.Get(int(rh.Size))
		}
		if rh.Size == 0 {
			return s.finishMessage(), true, nil
		}
		return it, false, nil
	case apitypes.FrameError:
		code, text, err := apitypes.ParseError(payload)
		if err != nil {
			return it, false, err
		}
		e := &Error{Code: code, Text: text}
		if h.Tag == 0 {
			if code == apitypes.CodeProtocol || code == apitypes.CodeClosed {
				return it, false, e // the daemon closes the session after it
			}
			s.rx.received.Store(true) // a drop notice: the daemon counted a message
			return recvItem{err: e}, true, nil
		}
		s.deliver(h.Tag, reply{typ: h.Type, err: e})
	case apitypes.FrameRecvAt:
		at, err := apitypes.ParseRecvAt(payload)
		if err != nil {
			return it, false, err
		}
		m, err := s.ringMessage(h.Tag, at)
		if err != nil {
			return it, false, err
		}
		s.rx.received.Store(true)
		s.mu.Lock()
		sink := s.sink
		s.mu.Unlock()
		it := recvItem{msg: m}
		switch {
		case sink != nil: // stream it out of the ring, then give the space back
			if _, err := sink(m).Write(m.Data); err != nil {
				it.err = fmt.Errorf("writing received message: %w", err)
			}
			s.releaseRing(m, false)
			m.ring, m.Data = nil, nil
		case m.ring.copyOut:
			s.copyOut(m)
		}
		return it, true, nil
	case apitypes.FrameBound, apitypes.FrameSent, apitypes.FrameFailed, apitypes.FrameRingOK:
		s.deliver(h.Tag, reply{typ: h.Type, payload: slices.Clone(payload)})
	case apitypes.FrameAccepted, apitypes.FrameCancelResult:
		return it, false, s.handleV2(h, payload)
	case apitypes.FrameDirectOK, apitypes.FrameDirectPeer:
		return it, false, s.handleDirect(h, payload)
	default:
		return it, false, fmt.Errorf("unexpected frame type 0x%02x from the daemon", h.Type)
	}
	return it, false, nil
}

// sinkWriter passes bytes to a SetRecvWriter writer and remembers its first error instead
// of returning it, so the session still consumes the whole message from the daemon.
type sinkWriter struct {
	w   io.Writer
	err error
}

// Write implements io.Writer.
func (x *sinkWriter) Write(p []byte) (int, error) {
	if x.err == nil {
		_, x.err = x.w.Write(p)
	}
	return len(p), nil
}

func (s *Session) deliver(tag uint32, r reply) {
	if tag != 0 && tag == s.auto.tag.Load() {
		s.autoReply(r) // the automatic ring's request: nobody waits for it
		return
	}
	s.fds.done(tag, r) // before the waiter learns of it: its memfd is idle now
	s.mu.Lock()
	ch := s.waiters[tag]
	delete(s.waiters, tag)
	s.mu.Unlock()
	if ch != nil {
		ch <- r
	}
}

// closeRecv makes Close's reading end: the token's holder (or Close itself, when nobody
// reads) reads until the closed socket's error and ends the session.
func (s *Session) closeRecv() {
	s.rx.once.Do(func() { close(s.rx.closed) })
	select {
	case <-s.rx.tok:
		s.lead(context.Background(), goal{close: true})
	case <-s.done:
	}
	<-s.done
	s.rx.idle.Stop()
}
