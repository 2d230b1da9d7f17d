package client

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/transport/apitypes"
	"github.com/smartt-transport/smartt/transport/bufpool"
)

// The automatic receive ring. A session whose daemon takes receive rings
// (apitypes.RecvRingHeader) sets one up by itself when it first receives a large message
// over the socket, and copies every message that arrives in it out into a buffer of its
// own before giving the space back: Recv's callers keep owned buffers (Message.InRing is
// false), and the bytes cross once into shared memory and once out of it instead of the
// socket's two kernel copies, its system calls and its wake-ups per socket buffer.
//
// It is lazy because the ring's pages are allocated up front: a session that never
// receives large messages never pays for them. The request is written by a goroutine of
// its own (the memfd's allocation takes a while, and the reader must not wait for the
// daemon's reply: it is the one that reads it); whoever reads the reply (deliver) ends the
// trial. A refusal or failure leaves the session on the socket for good, reported by
// AutoRecvRing.

// DefaultAutoRecvRing is the received message size from which a session sets up its
// receive ring (SetAutoRecvRing). Below a mebibyte a message crosses the socket in one
// or two buffers and the ring saves little per message; from there on the socket's
// copies, system calls and wake-ups grow with its size, and the ring's pages (four such
// messages) stay small beside what the application receives.
const DefaultAutoRecvRing = 1 << 20

// AutoRingMin is the smallest message the daemon puts in an automatic ring; smaller ones
// still come over the socket (RecvRing's second field). They cross a 4 MiB socket
// buffer in one write either way, and the ring would add its copy, its Release frames and
// a few microseconds to a request and reply exchange (docs/datapath.md): a session that
// once received a large message keeps the socket's round trip for its small ones.
const AutoRingMin = 64 << 10

// MaxAutoRecvRing is the largest ring a session sets up by itself (its pages are
// allocated for the session's lifetime). A message larger than half of it (or of the
// daemon's api.max_recv_ring) sets none up: the ring would hold too few of them to pay.
const MaxAutoRecvRing = 64 << 20

// autoRingMsgs is how many messages of the size that set the ring up it holds: the daemon
// copies the next ones in while the client copies one out.
const autoRingMsgs = 4

// The automatic ring's states.
const (
	autoIdle   = iota // not set up (yet)
	autoTrying        // the RecvRing request is on its way
	autoOn            // the daemon took it
	autoOff           // refused or failed, or the session has a ring of its own (EnableRecvRing): never again
)

// autoRing is the state of a session's automatic receive ring.
type autoRing struct {
	threshold atomic.Int64  // SetAutoRecvRing
	state     atomic.Int32  // autoIdle ..
	tag       atomic.Uint32 // the RecvRing request's tag (deliver hands its reply to autoReply)

	mu   sync.Mutex
	size int64 // the ring's bytes once the daemon took it
	err  error // why the session gave up on it
}

// SetAutoRecvRing makes the session set up a shared-memory receive ring by itself when it
// first receives a message of at least n bytes over the socket (n <= 0: never); the
// default is DefaultAutoRecvRing. The ring holds four such messages (rounded up to pages,
// at most MaxAutoRecvRing and the daemon's api.max_recv_ring); every later message that
// fits arrives through it and is copied out into a buffer of the Message's own, so Recv's
// semantics stay those of the socket (Message.InRing is false). Only Unix socket sessions
// whose daemon offers rings have one; it is set up at most once. Call it before messages
// arrive; it does not take down a ring already set up.
func (s *Session) SetAutoRecvRing(n int64) { s.auto.threshold.Store(max(n, 0)) }

// AutoRecvRing reports the session's automatic receive ring: its size in bytes once the
// daemon took it (0 before, or without one), or why the session gave up on it (the
// daemon's refusal, an *Error with code apitypes.CodeRing, or a local failure such as no
// memory for its pages); the session then goes on receiving over the socket.
func (s *Session) AutoRecvRing() (size int64, err error) {
	s.auto.mu.Lock()
	defer s.auto.mu.Unlock()
	return s.auto.size, s.auto.err
}

// autoRingSize returns the size of the automatic ring for a message of n bytes under
// the daemon's bound daemonMax, or 0 when n is too large for one.
func autoRingSize(n uint64, daemonMax int64) int64 {
	page := int64(os.Getpagesize())
	limit := min(MaxAutoRecvRing, daemonMax) &^ (page - 1)
	size := min((autoRingMsgs*int64(n)+page-1)&^(page-1), limit)
	if size < page || 2*int64(n) > size {
		return 0
	}
	return size
}

// maybeAutoRing starts setting up the automatic ring when a message of n bytes arrives
// over the socket, if it is due (the reader calls it: it must not block).
func (s *Session) maybeAutoRing(n uint64) {
	t := s.auto.threshold.Load()
	if t <= 0 || n < uint64(t) || s.ringMax == 0 || s.auto.state.Load() != autoIdle {
		return
	}
	size := autoRingSize(n, s.ringMax)
	if size == 0 || !s.auto.state.CompareAndSwap(autoIdle, autoTrying) {
		return
	}
	go s.setUpAutoRing(size)
}

// setUpAutoRing creates the ring and writes the RecvRing request; the reply ends the
// trial in autoReply.
func (s *Session) setUpAutoRing(size int64) {
	fd, mem, err := newRingMemfd(size)
	if err != nil {
		s.autoGiveUp(nil, err)
		return
	}
	defer unix.Close(fd)
	r := &recvRing{mem: mem, size: size, copyOut: true}
	if err := s.claimRing(r); err != nil {
		unix.Munmap(mem)
		s.autoGiveUp(nil, err)
		return
	}
	tag := s.nextTag()
	s.auto.tag.Store(tag)
	if err := s.writeRecvRing(tag, size, AutoRingMin, fd); err != nil {
		s.autoGiveUp(r, s.brokenErr(err))
	}
}

// autoReply ends the trial with the daemon's reply to the RecvRing request.
func (s *Session) autoReply(rep reply) {
	if rep.typ == apitypes.FrameRingOK && rep.err == nil {
		s.mu.Lock()
		r := s.ring
		s.mu.Unlock()
		if r != nil && s.auto.state.CompareAndSwap(autoTrying, autoOn) {
			s.auto.mu.Lock()
			s.auto.size = r.size
			s.auto.mu.Unlock()
		}
		return
	}
	err := rep.err
	if err == nil {
		err = fmt.Errorf("unexpected reply 0x%02x to RecvRing", rep.typ)
	}
	s.mu.Lock()
	r := s.ring
	s.mu.Unlock()
	s.autoGiveUp(r, err)
}

// autoGiveUp ends the trial: the session stays on the socket for good. r, if set, is the
// ring claimed for it.
func (s *Session) autoGiveUp(r *recvRing, err error) {
	if !s.auto.state.CompareAndSwap(autoTrying, autoOff) {
		return // the reply came first
	}
	if r != nil {
		s.dropRing(r)
	}
	s.auto.mu.Lock()
	s.auto.err = err
	s.auto.mu.Unlock()
}

// copyOut replaces the ring message m's Data with a buffer of its own and gives its ring
// space back at once (the reader calls it: its release never waits for the write lock).
func (s *Session) copyOut(m *Message) {
	buf := bufpool.Get(len(m.Data))
	copy(buf, m.Data)
	s.releaseRing(m, false)
	m.ring, m.Data = nil, buf
}
