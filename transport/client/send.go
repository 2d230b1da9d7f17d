package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/smartt-transport/smartt/transport/apitypes"
)

// The send path. A message the caller gives as a []byte goes to the daemon
// straight from the caller's slice: the frame headers are built in a per-session scratch
// and the headers and payloads go out as one writev, so the only copy of a byte on the
// client's side is the kernel's into the socket. Several messages can share that write
// (SendBatch). SendFrom (an io.Reader) reads each chunk into one buffer the session reuses.

// MaxBatch is the most messages one SendBatch call takes.
const MaxBatch = 256

// BatchMsg is one message of a SendBatch: Data for endpoint Endpoint at the daemon at To.
type BatchMsg struct {
	To       netip.AddrPort
	Endpoint uint32
	Data     []byte
}

// BatchError is SendBatch's error when the session broke during its write: the first Sent
// messages were handed to the daemon (their Pendings report their outcomes, or the end of
// the session), the rest were not (their Pendings fail with Err at once).
type BatchError struct {
	Sent int
	Err  error
}

// Error implements error.
func (e *BatchError) Error() string {
	return fmt.Sprintf("smarttd session broke after %d messages of a batch were handed over: %v", e.Sent, e.Err)
}

// Unwrap returns why the session broke.
func (e *BatchError) Unwrap() error { return e.Err }

const (
	sendScratch = 16 << 10 // bytes of frame headers (and small control payloads) per write
	sendIovs    = 1024     // iovecs per write (the kernel's IOV_MAX)
)

// sendState is the session's send-side scratch, guarded by Session.wmu. What is being
// written is built as a list of pieces (iov): runs of frame headers in hdr and, between
// them, the caller's payloads as they are.
type sendState struct {
	hdr    []byte      // frame headers of the write being built; never grows past its capacity
	iov    [][]byte    // the write being built
	bufs   net.Buffers // what WriteTo consumes (a field: as a local it would escape per write)
	run    int         // where in hdr the last piece of iov starts, if it is a header run
	runIov int         // the index of that piece in iov, or -1
	built  int64       // bytes put into iov by this call so far
	wrote  int64       // bytes written by this call so far
	ends   []int64     // SendBatch: built when each message's frames end
	chunk  []byte      // SendFrom's chunk, reused from message to message

	copySends   atomic.Bool  // SetCopySends
	fdThreshold atomic.Int64 // SetSendFDThreshold
}

// SetCopySends makes SendAsync, Send and SendFrom copy each message into a buffer
// allocated for it and write its frames through the session's write buffer, as the client
// did before it wrote from the caller's slice: for comparisons only
// (docs/datapath.md measures both). SendBatch is not affected.
func (s *Session) SetCopySends(on bool) { s.snd.copySends.Store(on) }

// beginLocked starts building a write. s.wmu is held.
func (s *Session) beginLocked() error {
	st := &s.snd
	if st.hdr == nil {
		st.hdr = make([]byte, 0, sendScratch)
		st.iov = make([][]byte, 0, sendIovs)
	}
	st.hdr, st.iov, st.runIov, st.built, st.wrote = st.hdr[:0], st.iov[:0], -1, 0, 0
	if s.bw.Buffered() > 0 { // control frames are flushed before wmu is released; this is a leftover of a failed write
		return s.bw.Flush()
	}
	return nil
}

// frameLocked adds a frame to the write being built: its header h, then inline (bytes
// copied into the header scratch: a Send frame's destination, a Release frame's tags), or
// sh's encoding if set, then payload, which is written from where it is. s.wmu is held.
func (s *Session) frameLocked(h apitypes.Header, sh *apitypes.SendHeader, inline, payload []byte) error {
	st := &s.snd
	n := apitypes.HeaderLen + len(inline)
	if sh != nil {
		n += apitypes.SendHeaderLen
	}
	if len(st.hdr)+n > cap(st.hdr) || len(st.iov)+2 > cap(st.iov) {
		if err := s.writeBuiltLocked(); err != nil {
			return err
		}
	}
	start := len(st.hdr)
	st.hdr = apitypes.AppendHeader(st.hdr, h)
	if sh != nil {
		st.hdr = sh.Append(st.hdr)
	}
	st.hdr = append(st.hdr, inline...)
	if st.runIov >= 0 && st.runIov == len(st.iov)-1 {
		st.iov[st.runIov] = st.hdr[st.run:] // headers that follow headers share a piece
	} else {
		st.run, st.runIov = start, len(st.iov)
		st.iov = append(st.iov, st.hdr[start:])
	}
	st.built += int64(n)
	if len(payload) > 0 {
		st.iov = append(st.iov, payload)
		st.built += int64(len(payload))
	}
	return nil
}

// writeBuiltLocked writes what is built with one writev (more if the socket takes it in
// parts) and starts over. A failed write leaves the framing broken: the connection is shut
// for writing. s.wmu is held.
func (s *Session) writeBuiltLocked() error {
	st := &s.snd
	if len(st.iov) == 0 {
		return nil
	}
	st.bufs = st.iov
	n, err := st.bufs.WriteTo(s.conn)
	st.wrote += n
	clear(st.iov) // WriteTo cleared what it wrote; no reference to the caller's bytes stays
	st.hdr, st.iov, st.bufs, st.runIov = st.hdr[:0], st.iov[:0], nil, -1
	if err != nil {
		// No more writes: a frame may be cut. Replies already on their way are still read
		// (the outcomes of the messages written whole).
		if cw, ok := s.conn.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			s.conn.Close()
		}
	}
	return err
}

// releasesLocked puts the pending ring releases in front of what is built (they share its
// write). s.wmu is held.
func (s *Session) releasesLocked() error {
	b := s.takeReleasesLocked()
	defer s.doneReleasesLocked(b)
	for p := b; len(p) > 0; { // frameLocked copies the tags into the header scratch
		k := min(len(p), 4*apitypes.MaxReleaseTags)
		if err := s.frameLocked(apitypes.Header{Type: apitypes.FrameRelease, Len: uint32(k)}, nil, p[:k], nil); err != nil {
			return err
		}
		p = p[k:]
	}
	return nil
}

// messageLocked adds a message's Send frame and its Data frames (payloads from data as it
// is) to the write being built. s.wmu is held.
func (s *Session) messageLocked(tag uint32, to netip.AddrPort, ep uint32, data []byte) error {
	sh := apitypes.SendHeader{To: to, Endpoint: ep, Size: uint64(len(data))}
	if err := s.frameLocked(apitypes.Header{Type: apitypes.FrameSend, Tag: tag, Len: apitypes.SendHeaderLen}, &sh, nil, nil); err != nil {
		return err
	}
	for off := 0; off < len(data); {
		n := min(len(data)-off, apitypes.MaxPayload)
		if err := s.frameLocked(apitypes.Header{Type: apitypes.FrameData, Tag: tag, Len: uint32(n)}, nil, nil, data[off:off+n]); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// Pending is a message handed to the daemon whose outcome is not known yet.
type Pending struct {
	s   *Session
	tag uint32
	ch  chan reply // nil once Wait has the outcome
	err error      // the message was not handed over (SendBatch), or its outcome once known
	// info is the outcome once known.
	info SentInfo
	// viaFD: SendAsync passed the message through a send memfd (autoFD); to, ep and
	// size are what a resend by streaming needs if the daemon refuses the memfd.
	viaFD bool
	// direct: written to a direct pair (direct.go), complete at once.
	direct bool
	to     netip.AddrPort
	ep     uint32
	size   int64
}

// replyChans recycles the channels that carry outcomes to Pendings: a channel whose one
// reply Wait took is empty and known to nobody else (the reader sends once per tag and
// forgets it), so the next message can use it. Without it a message costs a channel.
var replyChans = sync.Pool{New: func() any { return make(chan reply, 1) }}

// registerPooled registers tag's outcome on a recycled channel. s.mu is held.
func (s *Session) registerPooledLocked(tag uint32) chan reply {
	ch := replyChans.Get().(chan reply)
	s.waiters[tag] = ch
	return ch
}

// Wait returns the message's completion (nil error: the peer daemon received the whole
// message, in order, and handed it to its API) or why it failed. Once it has returned the
// outcome, later calls return it again; it must not be called from two goroutines at once.
func (p *Pending) Wait(ctx context.Context) (SentInfo, error) {
	if p.ch == nil {
		return p.info, p.err
	}
	// A daemon that holds Sent frames is asked for this one; the wait reads the session
	// itself when no other goroutine does (recv.go).
	p.s.wantSent(p.tag, p.ch)
	r, err := p.s.wait(ctx, p.tag, p.ch)
	if err != nil && r.err == nil { // ctx ended first: the tag is unregistered
		return SentInfo{}, err
	}
	replyChans.Put(p.ch)
	p.ch = nil
	if p.viaFD && isCodeFD(r.err) {
		// The daemon could not take the memfd (it could not map it, say): stream it.
		p.viaFD = false
		if err := p.resendStreamed(); err != nil {
			p.err = err
			return p.info, p.err
		}
		return p.Wait(ctx)
	}
	switch {
	case r.err != nil:
		p.err = r.err
	case r.typ == apitypes.FrameFailed && p.s.version >= 2 && string(r.payload) == apitypes.CancelledReason:
		p.err = fmt.Errorf("%w: %w", ErrFailed, ErrCancelled)
	case r.typ == apitypes.FrameFailed:
		p.err = fmt.Errorf("%w: %s", ErrFailed, r.payload)
	default:
		p.info, p.err = apitypes.ParseSentInfo(r.payload)
	}
	return p.info, p.err
}

// isCodeFD reports whether err is the daemon's refusal of a memfd (code 9). A function
// of its own: the target errors.As needs escapes, and only memfd messages pay for it.
func isCodeFD(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == apitypes.CodeFD
}

// errEmpty refuses an empty message.
func errEmpty() error { return &Error{Code: apitypes.CodeTooLarge, Text: "empty message"} }

// SendAsync hands data to the daemon for endpoint ep at the daemon at to, and returns
// without waiting for the outcome. data may be reused once SendAsync returns: its bytes
// are written to the socket (straight from data, with the frame headers, in one writev)
// before it returns, or, for a message of at least the session's SendFD threshold
// (SetSendFDThreshold) when its daemon takes SendFD, copied into one of the session's
// send memfds, which the daemon sends from.
func (s *Session) SendAsync(to netip.AddrPort, ep uint32, data []byte) (*Pending, error) {
	if len(data) == 0 {
		return nil, errEmpty()
	}
	if s.dir.on {
		return s.sendRouted(to, ep, data) // direct.go
	}
	return s.sendRelay(to, ep, data)
}

// sendRelay is SendAsync through the daemon.
func (s *Session) sendRelay(to netip.AddrPort, ep uint32, data []byte) (*Pending, error) {
	if s.snd.copySends.Load() {
		return s.sendCopy(to, ep, bytesReader(data), int64(len(data)), nil)
	}
	if s.autoFD(len(data)) {
		if p, ok, err := s.sendViaFD(to, ep, data); ok {
			return p, err
		}
	}
	return s.sendStream(to, ep, data)
}

// sendStream is SendAsync through the socket: the frames and data in one writev.
func (s *Session) sendStream(to netip.AddrPort, ep uint32, data []byte) (*Pending, error) {
	tag := s.nextTag()
	s.mu.Lock()
	if err := s.err; err != nil {
		s.mu.Unlock()
		return nil, err
	}
	ch := s.registerPooledLocked(tag)
	s.mu.Unlock()
	s.wmu.Lock()
	err := s.beginLocked()
	if err == nil {
		err = s.releasesLocked() // pending ring releases share this write
	}
	if err == nil {
		err = s.messageLocked(tag, to, ep, data)
	}
	if err == nil {
		err = s.writeBuiltLocked()
	}
	s.wmu.Unlock()
	if err != nil {
		s.unregister(tag)
		return nil, s.brokenErr(err)
	}
	return &Pending{s: s, tag: tag, ch: ch}, nil
}

// Send sends data and waits for its outcome.
func (s *Session) Send(ctx context.Context, to netip.AddrPort, ep uint32, data []byte) (SentInfo, error) {
	p, err := s.SendAsync(to, ep, data)
	if err != nil {
		return SentInfo{}, err
	}
	return p.Wait(ctx)
}

// SendBatch hands msgs (1..MaxBatch messages) to the daemon in one write (one writev
// system call unless the socket takes it in parts, and one read or a few at the daemon)
// and returns a Pending for each, in order, appended to pend; nothing is copied in user
// space, and every Data slice may be reused once SendBatch returns. For streams of small
// messages: the system calls per message fall with the batch's size. An empty batch
// writes nothing; a batch of more than MaxBatch messages is refused whole. A message that
// is refused fails alone: an empty one (its Pending's Wait returns the error at once), or
// one the daemon refuses (too large for api.max_message, a bad destination, ...: an
// *Error from its Wait, as for SendAsync); the others go. If the session breaks during
// the write, SendBatch returns a *BatchError: the messages wholly written before the
// break were handed over, the Pendings of the rest fail with the error at once.
func (s *Session) SendBatch(pend []*Pending, msgs []BatchMsg) ([]*Pending, error) {
	if len(msgs) == 0 {
		return pend, nil
	}
	if len(msgs) > MaxBatch {
		return pend, fmt.Errorf("a batch of %d messages: at most %d", len(msgs), MaxBatch)
	}
	if s.dir.on {
		s.dir.route.RLock()
		defer s.dir.route.RUnlock()
		if s.anyPairRLocked(msgs) {
			return s.sendEachRLocked(pend, msgs)
		}
	}
	ps := make([]Pending, len(msgs)) // one allocation for the batch's Pendings
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return pend, err
	}
	for i := range msgs {
		if len(msgs[i].Data) == 0 {
			ps[i] = Pending{err: errEmpty()}
			continue
		}
		tag := s.nextTag()
		ps[i] = Pending{s: s, tag: tag, ch: s.registerPooledLocked(tag)}
	}
	s.mu.Unlock()

	s.wmu.Lock()
	st := &s.snd
	st.ends = st.ends[:0]
	err := s.beginLocked()
	if err == nil {
		err = s.releasesLocked()
	}
	for i := range msgs {
		if err == nil && ps[i].err == nil {
			m := &msgs[i]
			err = s.messageLocked(ps[i].tag, m.To, m.Endpoint, m.Data)
		}
		st.ends = append(st.ends, st.built)
	}
	if err == nil {
		err = s.writeBuiltLocked()
	}
	sent := len(msgs)
	if err != nil {
		sent = 0
		for sent < len(msgs) && st.ends[sent] <= st.wrote {
			sent++
		}
	}
	s.wmu.Unlock()
	if err != nil {
		err = &BatchError{Sent: sent, Err: s.brokenErr(err)}
		for i := sent; i < len(msgs); i++ {
			if ps[i].err == nil {
				s.unregister(ps[i].tag)
				ps[i].err, ps[i].ch = err, nil
			}
		}
	}
	for i := range ps {
		pend = append(pend, &ps[i])
	}
	return pend, err
}

// SendFrom streams size bytes from r as one message, calling progress (if set) with the
// bytes written so far, and returns without waiting for the outcome. The bytes go through
// one chunk buffer of the session's (up to 1 MiB, reused by every message).
func (s *Session) SendFrom(to netip.AddrPort, ep uint32, r io.Reader, size int64, progress func(int64)) (*Pending, error) {
	if size <= 0 {
		return nil, errEmpty()
	}
	if s.dir.on {
		s.dir.route.RLock()
		defer s.dir.route.RUnlock()
		if p, _ := s.routeRLocked(destKey{to, ep}, false); p != nil {
			return s.sendOnPairFrom(p, r, size, progress)
		}
	}
	if s.snd.copySends.Load() {
		return s.sendCopy(to, ep, r, size, progress)
	}
	tag := s.nextTag()
	ch, err := s.register(tag)
	if err != nil {
		return nil, err
	}
	s.wmu.Lock()
	st := &s.snd
	err = s.beginLocked()
	if err == nil {
		err = s.releasesLocked()
	}
	if err == nil {
		sh := apitypes.SendHeader{To: to, Endpoint: ep, Size: uint64(size)}
		err = s.frameLocked(apitypes.Header{Type: apitypes.FrameSend, Tag: tag, Len: apitypes.SendHeaderLen}, &sh, nil, nil)
	}
	if need := int(min(size, apitypes.MaxPayload)); cap(st.chunk) < need {
		st.chunk = make([]byte, need)
	}
	chunk := st.chunk[:cap(st.chunk)]
	for off := int64(0); off < size && err == nil; {
		n := min(size-off, int64(len(chunk)))
		if _, err = io.ReadFull(r, chunk[:n]); err != nil {
			// The daemon expects the rest: a short source breaks the session.
			clear(st.iov)
			st.iov = st.iov[:0]
			s.wmu.Unlock()
			s.conn.Close()
			return nil, fmt.Errorf("reading the message at byte %d of %d: %w", off, size, err)
		}
		err = s.frameLocked(apitypes.Header{Type: apitypes.FrameData, Tag: tag, Len: uint32(n)}, nil, nil, chunk[:n])
		if err == nil {
			err = s.writeBuiltLocked() // before the chunk is reused
		}
		off += n
		if progress != nil && err == nil {
			progress(off)
		}
	}
	s.wmu.Unlock()
	if err != nil {
		s.unregister(tag)
		return nil, s.brokenErr(err)
	}
	return &Pending{s: s, tag: tag, ch: ch}, nil
}

// sendCopy is the former send path (SetCopySends): a chunk allocated per
// message, each Data frame copied into it and then through the session's write buffer.
func (s *Session) sendCopy(to netip.AddrPort, ep uint32, r io.Reader, size int64, progress func(int64)) (*Pending, error) {
	tag := s.nextTag()
	ch, err := s.register(tag)
	if err != nil {
		return nil, err
	}
	s.wmu.Lock()
	err = s.flushReleasesLocked() // pending ring releases share this write
	if err == nil {
		err = s.writeFrame(apitypes.FrameSend, tag, apitypes.SendHeader{To: to, Endpoint: ep, Size: uint64(size)}.Append(nil))
	}
	chunk := make([]byte, min(size, apitypes.MaxPayload))
	for off := int64(0); off < size && err == nil; {
		n := min(size-off, int64(len(chunk)))
		if _, err = io.ReadFull(r, chunk[:n]); err != nil {
			s.wmu.Unlock()
			s.conn.Close()
			return nil, fmt.Errorf("reading the message at byte %d of %d: %w", off, size, err)
		}
		err = s.writeFrame(apitypes.FrameData, tag, chunk[:n])
		off += n
		if progress != nil {
			progress(off)
		}
	}
	if err == nil {
		err = s.bw.Flush()
	}
	s.wmu.Unlock()
	if err != nil {
		s.unregister(tag)
		return nil, s.brokenErr(err)
	}
	return &Pending{s: s, tag: tag, ch: ch}, nil
}

type sliceReader struct {
	b   []byte
	off int
}

func bytesReader(b []byte) *sliceReader { return &sliceReader{b: b} }

// Read implements io.Reader.
func (r *sliceReader) Read(p []byte) (int, error) {
	if r.off >= len(r.b) {
		return 0, io.EOF
	}
	n := copy(p, r.b[r.off:])
	r.off += n
	return n, nil
}
