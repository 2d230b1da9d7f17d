package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/transport/apitypes"
	"github.com/smartt-transport/smartt/transport/bufpool"
)

// The direct path (docs/api.md, "Direct path"): messages to an endpoint of the same
// daemon go over a Unix socket pair the daemon hands to both sessions, not through the
// daemon. The first SendAsync to a destination asks the daemon (FrameDirect, one round
// trip); its answer is kept per destination. Messages to a destination with a pair are
// written to the pair and complete at once: Accepted and Sent mean what they mean for a
// local message through the daemon (the bytes are in the receiving session's queue, here
// the pair's socket buffer). A receiving client that does not read fills that buffer, and
// the sender's SendAsync then waits (back-pressure; nothing is dropped).

// relayAgain is how many messages to a destination go through the daemon before
// SendAsync asks again for a direct path the daemon refused (not local, or the receiver
// lacks it): the endpoint may be bound by a session with it later.
const relayAgain = 4096

// SetDirect turns the direct path off (false) or on (true, the default) for the
// sessions this client opens from now on.
func (c *Client) SetDirect(on bool) { c.noDirect = !on }

// Direct reports whether the session has the direct path (the daemon offered it).
func (s *Session) Direct() bool { return s.dir.on }

type destKey struct {
	to netip.AddrPort
	ep uint32
}

// destRoute is what the session knows of a destination: its pair, or how many more
// messages go through the daemon before it asks again.
type destRoute struct {
	pair      *directPair
	relayLeft int
}

// directState is a session's direct path. route is held shared while a message is
// written to the daemon for a destination without a pair, exclusively while one is
// asked for: no message through the daemon to a destination can be written after the
// daemon granted a pair to it (it could arrive after later messages over the pair).
type directState struct {
	on     bool
	fdr    *fdConnReader
	route  sync.RWMutex
	mu     sync.Mutex // guards dests, pairs, closed
	dests  map[destKey]*destRoute
	pairs  map[uint64]*directPair
	closed bool
	in     atomic.Bool // a peer writes to us over a pair: Recv no longer reads the daemon's socket
}

// directPair is one end of a pair; in: a peer writes to this session over it.
type directPair struct {
	id     uint64
	conn   *net.UnixConn
	wmu    sync.Mutex
	hdr    []byte
	bufs   net.Buffers
	dead   atomic.Bool
	in     bool // the reader runs (guarded by directState.mu)
	from   netip.AddrPort
	fromEP uint32
	ep     uint32
}

// routeRLocked returns dst's pair, or nil and whether to ask the daemon first (counting
// a message through the daemon otherwise). route is held shared.
func (s *Session) routeRLocked(k destKey, count bool) (*directPair, bool) {
	d := &s.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.dests[k]
	switch {
	case r == nil:
		return nil, count
	case r.pair != nil && !r.pair.dead.Load():
		return r.pair, false
	case r.pair != nil:
		delete(d.dests, k) // its peer went away: ask again
		return nil, count
	case r.relayLeft > 0:
		if count {
			r.relayLeft--
		}
		return nil, false
	}
	return nil, count
}

// sendRouted is SendAsync on a session with the direct path.
func (s *Session) sendRouted(to netip.AddrPort, ep uint32, data []byte) (*Pending, error) {
	k := destKey{to, ep}
	for range 2 {
		s.dir.route.RLock()
		pair, ask := s.routeRLocked(k, true)
		if pair != nil {
			s.dir.route.RUnlock()
			return s.sendOnPair(pair, data)
		}
		if !ask {
			p, err := s.sendRelay(to, ep, data)
			s.dir.route.RUnlock()
			return p, err
		}
		s.dir.route.RUnlock()
		if err := s.askDirect(k); err != nil {
			return nil, err
		}
	}
	s.dir.route.RLock()
	defer s.dir.route.RUnlock()
	if pair, _ := s.routeRLocked(k, false); pair != nil {
		return s.sendOnPair(pair, data)
	}
	return s.sendRelay(to, ep, data)
}

// askDirect asks the daemon for a direct path to k and records its answer.
func (s *Session) askDirect(k destKey) error {
	d := &s.dir
	d.route.Lock()
	defer d.route.Unlock()
	d.mu.Lock()
	if r := d.dests[k]; r != nil && (r.relayLeft > 0 || r.pair != nil && !r.pair.dead.Load()) {
		d.mu.Unlock()
		return nil // another goroutine asked meanwhile
	}
	d.mu.Unlock()
	tag := s.nextTag()
	ch, err := s.register(tag)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	err = s.flushReleasesLocked()
	if err == nil {
		err = s.writeFrame(apitypes.FrameDirect, tag, apitypes.AppendDirectReq(nil, k.to, k.ep))
	}
	if err == nil {
		err = s.bw.Flush()
	}
	s.wmu.Unlock()
	if err != nil {
		s.unregister(tag)
		return s.brokenErr(err)
	}
	r, err := s.wait(context.Background(), tag, ch)
	if err != nil {
		return err
	}
	st, id, err := apitypes.ParseDirectOK(r.payload)
	if err != nil {
		return err
	}
	route := &destRoute{}
	d.mu.Lock()
	switch p := d.pairs[id]; {
	case (st == apitypes.DirectNew || st == apitypes.DirectKnown) && p != nil && !p.dead.Load():
		route.pair = p
	default:
		route.relayLeft = relayAgain
	}
	d.dests[k] = route
	d.mu.Unlock()
	return nil
}

// sendOnPair writes a message to a pair; it is complete once written.
func (s *Session) sendOnPair(p *directPair, data []byte) (*Pending, error) {
	if uint64(len(data)) > apitypes.MaxDirectMsg {
		return nil, &Error{Code: apitypes.CodeTooLarge, Text: fmt.Sprintf("message of %d bytes: the direct path takes at most %d", len(data), uint64(apitypes.MaxDirectMsg))}
	}
	tag := s.nextTag()
	t0 := time.Now()
	p.wmu.Lock()
	p.hdr = apitypes.AppendDirectMsg(p.hdr[:0], uint64(len(data)))
	p.bufs = append(p.bufs[:0], p.hdr, data)
	_, err := p.bufs.WriteTo(p.conn)
	p.bufs = p.bufs[:0]
	p.wmu.Unlock()
	if err != nil {
		p.close()
		return nil, fmt.Errorf("smartt direct path: the receiving session is gone (the message was not delivered): %w", err)
	}
	return s.directDone(tag, t0), nil
}

// sendOnPairFrom writes a message of size bytes read from r to a pair.
func (s *Session) sendOnPairFrom(p *directPair, r io.Reader, size int64, progress func(int64)) (*Pending, error) {
	if size <= 0 || uint64(size) > apitypes.MaxDirectMsg {
		return nil, &Error{Code: apitypes.CodeTooLarge, Text: fmt.Sprintf("message of %d bytes: the direct path takes 1..%d", size, uint64(apitypes.MaxDirectMsg))}
	}
	tag := s.nextTag()
	t0 := time.Now()
	p.wmu.Lock()
	p.hdr = apitypes.AppendDirectMsg(p.hdr[:0], uint64(size))
	_, err := p.conn.Write(p.hdr)
	for left := size; err == nil && left > 0; {
		var n int64
		n, err = io.CopyN(p.conn, r, min(left, apitypes.MaxPayload))
		left -= n
		if progress != nil {
			progress(size - left)
		}
	}
	p.wmu.Unlock()
	if err != nil {
		p.close() // a message cut short breaks the pair's framing
		return nil, fmt.Errorf("smartt direct path: %w", err)
	}
	return s.directDone(tag, t0), nil
}

// directDone is the completed Pending of a message written to a pair.
func (s *Session) directDone(tag uint32, t0 time.Time) *Pending {
	s.accepted.Add(1)
	s.mu.Lock()
	f := s.onAccepted
	s.mu.Unlock()
	if f != nil {
		f(tag)
	}
	return &Pending{s: s, tag: tag, direct: true, info: SentInfo{Elapsed: time.Since(t0)}}
}

// close ends the pair (its peer went away, or this session ends).
func (p *directPair) close() {
	if !p.dead.Swap(true) {
		p.conn.Close()
	}
}

// handleDirect handles FrameDirectOK and FrameDirectPeer (a reader's call).
func (s *Session) handleDirect(h apitypes.Header, payload []byte) error {
	if !s.dir.on {
		return fmt.Errorf("unexpected frame type 0x%02x: no direct path was negotiated", h.Type)
	}
	if h.Type == apitypes.FrameDirectOK {
		st, id, err := apitypes.ParseDirectOK(payload)
		if err != nil {
			return err
		}
		if st == apitypes.DirectNew {
			if _, err := s.adoptPair(id); err != nil {
				return err
			}
		}
		s.deliver(h.Tag, reply{typ: h.Type, payload: append([]byte(nil), payload...)})
		return nil
	}
	dp, err := apitypes.ParseDirectPeer(payload)
	if err != nil {
		return err
	}
	s.dir.mu.Lock()
	p := s.dir.pairs[dp.Pair]
	s.dir.mu.Unlock()
	if p == nil {
		if p, err = s.adoptPair(dp.Pair); err != nil {
			return err
		}
	}
	d := &s.dir
	d.mu.Lock()
	start := !p.in && !d.closed
	if start {
		p.in, p.from, p.fromEP, p.ep = true, dp.From, dp.FromEndpoint, dp.Endpoint
	}
	d.mu.Unlock()
	if start {
		if !d.in.Swap(true) {
			go s.readDaemon() // Recv waits on the queue only from now on
		}
		go s.readPair(p)
	}
	return nil
}

// adoptPair takes the descriptor that came with a frame naming pair id.
func (s *Session) adoptPair(id uint64) (*directPair, error) {
	fd, ok := s.dir.fdr.take()
	if !ok {
		return nil, errors.New("the daemon named a new direct pair without passing its socket")
	}
	f := os.NewFile(uintptr(fd), "smartt-direct")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("direct pair: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, errors.New("direct pair: not a Unix socket")
	}
	uc.SetWriteBuffer(SocketBuffer)
	p := &directPair{id: id, conn: uc}
	d := &s.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.pairs[id] != nil {
		uc.Close()
		return nil, fmt.Errorf("direct pair %d passed twice", id)
	}
	d.pairs[id] = p
	return p, nil
}

// readDaemon reads the daemon's socket for the rest of the session once a peer writes
// to this session over a pair: a Recv blocked in a read of the daemon's socket would
// not see messages from the pair.
func (s *Session) readDaemon() {
	s.wakeReader() // a Recv reading now gives the token back (lead)
	select {
	case <-s.rx.tok:
	case <-s.done:
		return
	}
	s.lead(context.Background(), goal{close: true})
}

// readPair reads the messages a peer writes over pair p into the receive queue, until
// the pair or the session ends. A malformed header ends the pair, not the session.
func (s *Session) readPair(p *directPair) {
	defer p.close()
	br := bufio.NewReaderSize(p.conn, 64<<10)
	var hb [apitypes.DirectMsgLen]byte
	for {
		if _, err := io.ReadFull(br, hb[:]); err != nil {
			return
		}
		n, err := apitypes.ParseDirectMsg(hb[:])
		if err != nil {
			return
		}
		m := &Message{From: p.from, FromEndpoint: p.fromEP, Endpoint: p.ep, Size: n}
		it := recvItem{msg: m}
		s.mu.Lock()
		sink := s.sink
		s.mu.Unlock()
		if sink != nil {
			w := &sinkWriter{w: sink(m)}
			if _, err := io.CopyN(w, br, int64(n)); err != nil {
				return
			}
			if w.err != nil {
				it.err = fmt.Errorf("writing received message: %w", w.err)
			}
		} else {
			m.Data = bufpool.Get(int(n))
			if _, err := io.ReadFull(br, m.Data); err != nil {
				bufpool.Put(m.Data)
				return
			}
		}
		select {
		case s.recv <- it:
		case <-s.rx.closed:
			m.Release()
			return
		}
	}
}

// closeDirect ends every pair of the session.
func (s *Session) closeDirect() {
	d := &s.dir
	if !d.on {
		return
	}
	d.mu.Lock()
	d.closed = true
	pairs := d.pairs
	d.pairs = map[uint64]*directPair{}
	d.mu.Unlock()
	for _, p := range pairs {
		p.close()
	}
	d.fdr.closeAll()
}

// fdConnReader reads a session's socket and keeps the descriptors passed with its bytes
// (SCM_RIGHTS), in order, for the frames that name them. Its recvmsg allocates nothing.
type fdConnReader struct {
	rc   syscall.RawConn
	oob  []byte
	msg  unix.Msghdr // recvmsg's header, a field: as a local it would escape per read
	iov  unix.Iovec
	n    int
	errn unix.Errno
	rfn  func(fd uintptr) bool // made once: a closure per read would allocate
	mu   sync.Mutex
	fds  []int
	off  bool
}

func newFDConnReader(uc *net.UnixConn) (*fdConnReader, error) {
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	r := &fdConnReader{rc: rc, oob: make([]byte, unix.CmsgSpace(4*8))}
	r.rfn = func(fd uintptr) bool {
		n, _, e := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&r.msg)), msgCmsgCloexec)
		r.n, r.errn = int(n), e
		return e != unix.EAGAIN
	}
	return r, nil
}

// Read implements io.Reader.
func (r *fdConnReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.iov.Base = &p[0]
	r.iov.SetLen(len(p))
	r.msg = unix.Msghdr{Iov: &r.iov, Control: &r.oob[0]}
	r.msg.SetIovlen(1)
	r.msg.SetControllen(len(r.oob))
	err := r.rc.Read(r.rfn)
	r.iov.Base = nil
	if err == nil && r.errn != 0 {
		err = r.errn
	}
	if err != nil {
		return 0, err
	}
	if oobn := int(r.msg.Controllen); oobn > 0 {
		r.collect(r.oob[:oobn])
	}
	if r.n == 0 {
		return 0, io.EOF
	}
	return r.n, nil
}

// collect keeps the descriptors of control messages b.
func (r *fdConnReader) collect(b []byte) {
	msgs, _ := unix.ParseSocketControlMessage(b)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		fds, _ := unix.ParseUnixRights(&m)
		for _, fd := range fds {
			if r.off || len(r.fds) >= 64 {
				unix.Close(fd)
				continue
			}
			r.fds = append(r.fds, fd)
		}
	}
}

// take returns the oldest kept descriptor.
func (r *fdConnReader) take() (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.fds) == 0 {
		return -1, false
	}
	fd := r.fds[0]
	r.fds = r.fds[1:]
	return fd, true
}

// closeAll closes the descriptors nobody took, and any arriving later.
func (r *fdConnReader) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.off = true
	for _, fd := range r.fds {
		unix.Close(fd)
	}
	r.fds = nil
}

// anyPairRLocked reports whether a message of msgs goes to a destination with a pair.
func (s *Session) anyPairRLocked(msgs []BatchMsg) bool {
	for i := range msgs {
		if p, _ := s.routeRLocked(destKey{msgs[i].To, msgs[i].Endpoint}, false); p != nil {
			return true
		}
	}
	return false
}

// sendEachRLocked is SendBatch for a batch with messages to pairs: each message on its
// own, over its pair or through the daemon. A message that fails fails alone.
func (s *Session) sendEachRLocked(pend []*Pending, msgs []BatchMsg) ([]*Pending, error) {
	for i := range msgs {
		m := &msgs[i]
		var p *Pending
		var err error
		switch pair, _ := s.routeRLocked(destKey{m.To, m.Endpoint}, false); {
		case len(m.Data) == 0:
			err = errEmpty()
		case pair != nil:
			p, err = s.sendOnPair(pair, m.Data)
		default:
			p, err = s.sendRelay(m.To, m.Endpoint, m.Data)
		}
		if err != nil {
			p = &Pending{err: err}
		}
		pend = append(pend, p)
	}
	return pend, nil
}

// wakeReader interrupts a blocked read of the daemon's socket (its reader then finds
// that it should give the socket to readDaemon).
func (s *Session) wakeReader() {
	x := &s.rx
	x.dlmu.Lock()
	if !x.dlSet {
		x.dlSet = true
		s.conn.SetReadDeadline(time.Unix(1, 0))
	}
	x.dlmu.Unlock()
}
