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
	mem []byte

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

// EnableRecvRing asks the daemon to hand received messages over in a shared-memory ring
// of size bytes (a multiple of the page size, at most the daemon's api.max_recv_ring):
// the daemon copies each message that fits into the ring once and the session's Recv
// returns it in place (Message.Data aliases the ring, read-only) instead of reading it
// from the socket. Each such message must be given back with Message.Release: the ring
// is reclaimed in order, so a message held keeps the ring from reusing its space and
// that of every later message, and a client that releases nothing for the daemon's
// api.write_timeout while a message waits for room is disconnected. Messages larger
// than the ring still come over the socket. Call it once, before messages arrive that
// should use it; the ring's pages are allocated here (charged to this process).
func (s *Session) EnableRecvRing(ctx context.Context, size int64) error {
	uc, ok := s.conn.(*net.UnixConn)
	if !ok {
		return errors.New("EnableRecvRing needs a Unix socket session")
	}
	page := int64(os.Getpagesize())
	if size < page || size%page != 0 || size > 1<<30 {
		return fmt.Errorf("receive ring of %d bytes: must be a multiple of the page size (%d) in %d..%d", size, page, page, 1<<30)
	}
	s.mu.Lock()
	has := s.ring != nil
	s.mu.Unlock()
	if has {
		return errors.New("the session already has a receive ring")
	}
	fd, err := unix.MemfdCreate("smartt-recv-ring", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return fmt.Errorf("memfd_create: %w", err)
	}
	defer unix.Close(fd) // the daemon keeps its mapping, we keep ours
	if err := unix.Fallocate(fd, 0, 0, size); err != nil {
		return fmt.Errorf("allocating the receive ring (%d bytes): %w", size, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fmt.Errorf("sealing the receive ring: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mapping the receive ring: %w", err)
	}
	r := &recvRing{mem: mem}
	s.mu.Lock()
	s.ring = r // before the request: RecvAt frames may follow the daemon's reply at once
	s.mu.Unlock()
	fail := func(err error) error {
		s.mu.Lock()
		if s.ring == r {
			s.ring = nil
		}
		s.mu.Unlock()
		r.mu.Lock()
		r.closing = true
		r.unmapIfDoneLocked()
		r.mu.Unlock()
		return err
	}
	tag := s.nextTag()
	ch, err := s.register(tag)
	if err != nil {
		return fail(err)
	}
	payload := apitypes.AppendSize(nil, uint64(size))
	frame := append(apitypes.AppendHeader(nil, apitypes.Header{Type: apitypes.FrameRecvRing, Tag: tag, Len: uint32(len(payload))}), payload...)
	s.wmu.Lock()
	err = s.flushReleasesLocked()
	if err == nil {
		err = s.bw.Flush()
	}
	if err == nil {
		var n int
		n, _, err = uc.WriteMsgUnix(frame, unix.UnixRights(fd), nil)
		if err == nil && n != len(frame) {
			err = fmt.Errorf("short write of a RecvRing frame: %d of %d bytes", n, len(frame))
		}
	}
	s.wmu.Unlock()
	if err != nil {
		s.unregister(tag)
		return fail(s.brokenErr(err))
	}
	rep, err := s.wait(ctx, tag, ch)
	if err != nil {
		return fail(err)
	}
	if rep.typ != apitypes.FrameRingOK {
		return fail(fmt.Errorf("unexpected reply 0x%02x to RecvRing", rep.typ))
	}
	return nil
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
const releaseDelay = time.Millisecond

// releaseRing gives a ring message back to the daemon. Releases are batched into one
// Release frame that goes out with the session's next frame (a Send, say: no write and no
// daemon wake-up of its own), at once when MaxReleaseTags are pending or they free a
// quarter of the ring, else after releaseDelay (1 ms).
func (s *Session) releaseRing(m *Message) {
	r := m.ring
	r.mu.Lock()
	r.held--
	size := int64(len(r.mem))
	r.unmapIfDoneLocked()
	r.mu.Unlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.rel = apitypes.AppendRelease(s.rel, m.tag)
	s.relBytes += int64(m.Size)
	if len(s.rel) >= 4*apitypes.MaxReleaseTags || s.relBytes >= size/4 {
		if s.flushReleasesLocked() == nil {
			_ = s.bw.Flush()
		}
		return
	}
	if !s.relArmed {
		s.relArmed = true
		if s.relTimer == nil {
			s.relTimer = time.AfterFunc(releaseDelay, s.releaseNow)
		} else {
			s.relTimer.Reset(releaseDelay)
		}
	}
}

// releaseNow writes the pending releases (the timer of releaseRing). The timer is armed
// at most once per releaseDelay and never stopped early: re-arming a timer per message
// costs the runtime a wake-up of its poller, more than the release saves.
func (s *Session) releaseNow() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.relArmed = false
	if len(s.rel) > 0 && s.flushReleasesLocked() == nil {
		_ = s.bw.Flush()
	}
}

// flushReleasesLocked puts the pending releases as one Release frame into the write
// buffer, ahead of whatever the caller writes next. s.wmu is held.
func (s *Session) flushReleasesLocked() error {
	if len(s.rel) == 0 {
		return nil
	}
	err := s.writeFrame(apitypes.FrameRelease, 0, s.rel)
	s.rel, s.relBytes = s.rel[:0], 0
	return err
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
