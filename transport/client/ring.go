package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/transport/apitypes"
)

// recvRing is the client's side of a shared-memory receive ring: the memfd's pages,
// mapped read-only, which received messages alias until released.
type recvRing struct {
	mem     []byte
	size    int64
	copyOut bool // the automatic ring: each message is copied out and released at once (autoring.go)

	mu      sync.Mutex
	held    int  // messages received in the ring and not released
	closing bool // the session closed: unmap once held is 0
}

// unmapIfDone unmaps the ring once the session is closed and no message aliases it.
// r.mu is held.
func (r *recvRing) unmapIfDoneLocked() {
	if r.closing && r.held == 0 && r.mem != nil {
		unix.Munmap(r.mem)
		r.mem = nil
	}
}

// maxRing is the largest receive ring the client asks for (the daemon's own bound).
const maxRing = 1 << 30

// EnableRecvRing asks the daemon to hand received messages over in a shared-memory ring
// of size bytes (a multiple of the page size, at most the daemon's api.max_recv_ring):
// the daemon copies each message that fits into the ring once and the session's Recv
// returns it in place (Message.Data aliases the ring, read-only) instead of reading it
// from the socket. Each such message must be given back with Message.Release: the ring
// is reclaimed in order, so a message held keeps the ring from reusing its space and
// that of every later message, and a client that releases nothing for the daemon's
// api.write_timeout while a message waits for room is disconnected. Messages larger
// than the ring still come over the socket. Call it once, before messages arrive that
// should use it; the ring's pages are allocated here (charged to this process). It
// replaces the automatic ring (SetAutoRecvRing), and fails once the session has set
// that one up.
func (s *Session) EnableRecvRing(ctx context.Context, size int64) error {
	if _, ok := s.conn.(*net.UnixConn); !ok {
		return errors.New("EnableRecvRing needs a Unix socket session")
	}
	page := int64(os.Getpagesize())
	if size < page || size%page != 0 || size > maxRing {
		return fmt.Errorf("receive ring of %d bytes: must be a multiple of the page size (%d) in %d..%d", size, page, page, maxRing)
	}
	s.mu.Lock()
	has := s.ring != nil
	s.mu.Unlock()
	if has {
		return errors.New("the session already has a receive ring")
	}
	if !s.auto.state.CompareAndSwap(autoIdle, autoOff) && s.auto.state.Load() != autoOff {
		return errors.New("the session already has a receive ring (set up by itself: SetAutoRecvRing(0) before receiving turns that off)")
	}
	fd, mem, err := newRingMemfd(size)
	if err != nil {
		return err
	}
	defer unix.Close(fd) // the daemon keeps its mapping, we keep ours
	r := &recvRing{mem: mem, size: size}
	if err := s.claimRing(r); err != nil { // before the request: RecvAt frames may follow the daemon's reply at once
		unix.Munmap(mem)
		return err
	}
	tag := s.nextTag()
	ch, err := s.register(tag)
	if err != nil {
		s.dropRing(r)
		return err
	}
	if err := s.writeRecvRing(tag, size, 0, fd); err != nil {
		s.unregister(tag)
		s.dropRing(r)
		return s.brokenErr(err)
	}
	rep, err := s.wait(ctx, tag, ch)
	if err != nil {
		s.dropRing(r)
		return err
	}
	if rep.typ != apitypes.FrameRingOK {
		s.dropRing(r)
		return fmt.Errorf("unexpected reply 0x%02x to RecvRing", rep.typ)
	}
	return nil
}

// newRingMemfd makes a ring's memfd of size bytes: its pages allocated (charged to this
// process, so the daemon's writes never fault), sealed against shrinking and growing, and
// mapped read-only.
func newRingMemfd(size int64) (fd int, mem []byte, err error) {
	fd, err = memfdCreate("smartt-recv-ring")
	if err != nil {
		return -1, nil, fmt.Errorf("memfd_create: %w", err)
	}
	if err := fallocate(fd, size); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("allocating the receive ring (%d bytes): %w", size, err)
	}
	if err := sealSize(uintptr(fd)); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("sealing the receive ring: %w", err)
	}
	mem, err = unix.Mmap(fd, 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("mapping the receive ring: %w", err)
	}
	return fd, mem, nil
}

// claimRing makes r the session's ring, unless it has one or is closed.
func (s *Session) claimRing(r *recvRing) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.rx.closed:
		return errors.New("session closed")
	default:
	}
	if s.err != nil {
		return s.err
	}
	if s.ring != nil {
		return errors.New("the session already has a receive ring")
	}
	s.ring = r
	s.relEarly.Store(r.size / 16)
	return nil
}

// dropRing undoes claimRing after a refusal or failure: r is unmapped once no message
// aliases it.
func (s *Session) dropRing(r *recvRing) {
	s.mu.Lock()
	if s.ring == r {
		s.ring = nil
	}
	s.mu.Unlock()
	r.mu.Lock()
	r.closing = true
	r.unmapIfDoneLocked()
	r.mu.Unlock()
}

// writeRecvRing writes the RecvRing frame of tag with the ring's descriptor, behind
// whatever is pending (releases, buffered frames); least > 0 asks the daemon to send
// messages smaller than it over the socket (only to a daemon that said RecvRingHeader).
func (s *Session) writeRecvRing(tag uint32, size, least int64, fd int) error {
	payload := apitypes.AppendRecvRing(nil, uint64(size), uint64(least))
	frame := append(apitypes.AppendHeader(nil, apitypes.Header{Type: apitypes.FrameRecvRing, Tag: tag, Len: uint32(len(payload))}), payload...)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	err := s.flushReleasesLocked()
	if err == nil {
		err = s.bw.Flush()
	}
	if err != nil {
		return err
	}
	n, _, err := s.conn.(*net.UnixConn).WriteMsgUnix(frame, unix.UnixRights(fd), nil)
	if err == nil && n != len(frame) {
		err = fmt.Errorf("short write of a RecvRing frame: %d of %d bytes", n, len(frame))
		s.conn.(*net.UnixConn).CloseWrite() // the framing is broken
	}
	return err
}

// ringMessage builds the message a RecvAt frame announces, aliasing the ring.
func (s *Session) ringMessage(tag uint32, at apitypes.RecvAt) (*Message, error) {
	s.mu.Lock()
	r := s.ring
	s.mu.Unlock()
	if r == nil {
		return nil, errors.New("daemon announced a message in a receive ring the session does not have")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if at.Size == 0 || at.Offset > uint64(len(r.mem)) || at.Size > uint64(len(r.mem))-at.Offset {
		return nil, fmt.Errorf("daemon announced %d bytes at offset %d of a %d-byte receive ring", at.Size, at.Offset, len(r.mem))
	}
	r.held++
	end := at.Offset + at.Size
	return &Message{From: at.From, FromEndpoint: at.FromEndpoint, Endpoint: at.Endpoint, Size: at.Size,
		Data: r.mem[at.Offset:end:end], ring: r, sess: s, tag: tag}, nil
}

// releaseDelay is how long a release may wait to share a write with a later frame: longer
// than a small message's round trip, so a client that answers what it receives never
// writes a Release frame of its own.
var releaseDelay = time.Millisecond

// releaseRing gives a ring message back to the daemon. Releases are batched into one
// Release frame that goes out with the session's next frame (a Send, say: no write and no
// daemon wake-up of its own), at once when MaxReleaseTags are pending or they free a
// quarter of the ring, when the session's reader is about to block on the socket with a
// sixteenth of the ring pending (lead), else after releaseDelay (1 ms). block: wait for
// the write lock to write at once; the reader does not (a long write holding it must not
// stop the reading), the timer writes instead.
func (s *Session) releaseRing(m *Message, block bool) {
	r := m.ring
	r.mu.Lock()
	r.held--
	r.unmapIfDoneLocked()
	r.mu.Unlock()
	s.relMu.Lock()
	s.rel = apitypes.AppendRelease(s.rel, m.tag)
	s.relBytes += int64(m.Size)
	s.relPend.Store(s.relBytes)
	now := len(s.rel) >= 4*apitypes.MaxReleaseTags || s.relBytes >= r.size/4
	s.relMu.Unlock()
	if now && s.flushReleases(block) {
		return
	}
	s.armReleases()
}

// armReleases makes sure the release timer is armed. It is armed at most once per
// releaseDelay and never stopped early: re-arming a timer per message costs the runtime a
// wake-up of its poller, more than the release saves. So pending releases always have
// the timer armed (releaseNow disarms it before it takes them).
func (s *Session) armReleases() {
	s.relMu.Lock()
	defer s.relMu.Unlock()
	if s.relArmed || s.relClosed {
		return
	}
	s.relArmed = true
	if s.relTimer == nil {
		s.relTimer = time.AfterFunc(releaseDelay, s.releaseNow)
	} else {
		s.relTimer.Reset(releaseDelay)
	}
}

// releaseNow writes the pending releases (the timer of armReleases).
func (s *Session) releaseNow() {
	s.relMu.Lock()
	s.relArmed = false
	s.relMu.Unlock()
	s.flushReleases(true)
}

// flushReleases writes the pending releases at once; without block only if the write
// lock is free (reporting whether it was).
func (s *Session) flushReleases(block bool) bool {
	if block {
		s.wmu.Lock()
	} else if !s.wmu.TryLock() {
		return false
	}
	defer s.wmu.Unlock()
	if s.flushReleasesLocked() == nil {
		_ = s.bw.Flush() // a broken session reaches the waiters through the reader
	}
	return true
}

// takeReleasesLocked returns the pending release tags and starts a new batch; the caller
// writes them and gives the buffer back with doneReleasesLocked (no allocation per
// batch). relMu is never held across a write, so the reader's releases never wait for
// one. s.wmu is held.
func (s *Session) takeReleasesLocked() []byte {
	if s.relPend.Load() == 0 { // ring messages are never empty: no bytes, no tags
		return nil
	}
	s.relMu.Lock()
	b := s.rel
	s.rel, s.relOut = s.relOut[:0], nil
	s.relBytes = 0
	s.relPend.Store(0)
	s.relMu.Unlock()
	return b
}

// doneReleasesLocked takes back the buffer of takeReleasesLocked. s.wmu is held.
func (s *Session) doneReleasesLocked(b []byte) {
	if b != nil {
		s.relOut = b[:0]
	}
}

// flushReleasesLocked puts the pending releases as Release frames (of at most
// MaxReleaseTags) into the write buffer, ahead of whatever the caller writes next. s.wmu
// is held.
func (s *Session) flushReleasesLocked() error {
	b := s.takeReleasesLocked()
	defer s.doneReleasesLocked(b)
	for p := b; len(p) > 0; {
		k := min(len(p), 4*apitypes.MaxReleaseTags)
		if err := s.writeFrame(apitypes.FrameRelease, 0, p[:k]); err != nil {
			return err
		}
		p = p[k:]
	}
	return nil
}

// closeRing unmaps the ring once no received message aliases it.
func (s *Session) closeRing() {
	s.mu.Lock()
	r := s.ring
	s.mu.Unlock()
	if r == nil {
		return
	}
	r.mu.Lock()
	r.closing = true
	r.unmapIfDoneLocked()
	r.mu.Unlock()
}
