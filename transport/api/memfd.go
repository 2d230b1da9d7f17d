package api

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/transport/daemon"
)

// maxQueuedFDs bounds the descriptors a client may send ahead of their SendFD frames.
const maxQueuedFDs = 16

// fdReader reads a Unix socket's bytes and collects the descriptors passed with them
// (SCM_RIGHTS), in order. Each SendFD frame consumes the oldest one.
type fdReader struct {
	uc  *net.UnixConn
	oob []byte
	// readv's state, kept so that a readv allocates nothing.
	rc    syscall.RawConn
	msg   unix.Msghdr
	iov   [2]unix.Iovec
	rvFn  func(fd uintptr) bool
	rvN   int
	rvErr error
	mu    sync.Mutex
	fds   []int
	off   bool  // closed: descriptors arriving late are closed at once
	bad   error // set when the client passed too many descriptors or a truncated control message
}

func newFDReader(uc *net.UnixConn) *fdReader {
	return &fdReader{uc: uc, oob: make([]byte, unix.CmsgSpace(4*maxQueuedFDs))}
}

// Read reads bytes and keeps the descriptors that came with them (readv into p alone).
func (r *fdReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, err := r.readv(p, nil)
	return n, err
}

// readv reads into a, then b (which may be empty), with one recvmsg, and keeps the
// descriptors that came with the bytes. It returns the bytes read into each; (0, 0, io.EOF)
// when the client closed the connection. The connection's read deadline applies.
func (r *fdReader) readv(a, b []byte) (na, nb int, err error) {
	if r.rc == nil {
		if r.rc, err = r.uc.SyscallConn(); err != nil {
			return 0, 0, err
		}
		r.rvFn = func(fd uintptr) bool { // made once: a closure per read would allocate
			for {
				// Raw: the socket is non-blocking (EAGAIN parks in the poller), and
				// a scheduler-visible syscall wakes the runtime's sysmon thread from
				// its deep sleep on every message (about 4 context switches each).
				n, _, e := unix.RawSyscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&r.msg)), msgCmsgCloexec)
				switch e {
				case unix.EINTR:
					continue
				case unix.EAGAIN:
					return false // wait until readable
				case 0:
					r.rvN, r.rvErr = int(n), nil
				default:
					r.rvN, r.rvErr = 0, e
				}
				return true
			}
		}
	}
	r.iov[0].Base = &a[0]
	r.iov[0].SetLen(len(a))
	niov := 1
	if len(b) > 0 {
		r.iov[1].Base = &b[0]
		r.iov[1].SetLen(len(b))
		niov = 2
	}
	r.msg = unix.Msghdr{Iov: &r.iov[0], Control: &r.oob[0]}
	r.msg.SetIovlen(niov)
	r.msg.SetControllen(len(r.oob))
	err = r.rc.Read(r.rvFn)
	r.iov = [2]unix.Iovec{} // keep no reference to the buffers
	if err == nil {
		err = r.rvErr
	}
	n := r.rvN
	r.rvN, r.rvErr = 0, nil
	if err != nil {
		return 0, 0, err
	}
	if oobn := int(r.msg.Controllen); oobn > 0 {
		r.collect(r.oob[:oobn])
	}
	if r.msg.Flags&unix.MSG_CTRUNC != 0 {
		r.setBad(errors.New("descriptors truncated: too many passed at once"))
	}
	if n == 0 {
		return 0, 0, io.EOF
	}
	na = min(n, len(a))
	return na, n - na, nil
}

func (r *fdReader) collect(oob []byte) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		r.setBad(fmt.Errorf("control message: %w", err))
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if r.off {
				unix.Close(fd)
				continue
			}
			if len(r.fds) >= maxQueuedFDs {
				unix.Close(fd)
				if r.bad == nil {
					r.bad = fmt.Errorf("more than %d descriptors passed ahead of their SendFD frames", maxQueuedFDs)
				}
				continue
			}
			r.fds = append(r.fds, fd)
		}
	}
}

func (r *fdReader) setBad(err error) {
	r.mu.Lock()
	if r.bad == nil {
		r.bad = err
	}
	r.mu.Unlock()
}

// take returns the oldest descriptor received.
func (r *fdReader) take() (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bad != nil {
		return -1, r.bad
	}
	if len(r.fds) == 0 {
		return -1, errors.New("SendFD or RecvRing frame without a descriptor (pass one memfd per frame with SCM_RIGHTS)")
	}
	fd := r.fds[0]
	r.fds = r.fds[1:]
	return fd, nil
}

// closeAll closes descriptors never claimed (the session ended).
func (r *fdReader) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, fd := range r.fds {
		unix.Close(fd)
	}
	r.fds, r.off = nil, true
}

var _ io.Reader = (*fdReader)(nil)

// checkMemfd checks that fd is a memfd on shmem sealed against shrinking and growing of
// at least FDHeadroom+size bytes, and returns its stat. The seals keep the pages from
// going away under a mapping (a truncated file would fault the daemon); hugetlb memfds
// are refused (the envelope's copy-on-write of a hugetlb page can fault). A seal against
// writes is not required: the daemon only sends the bytes and relies on none of them, so
// a client that writes into a memfd whose message is in flight garbles only that message
// (the Go client reuses its memfds once the outcome arrived); a larger file lets a
// client reuse one memfd for messages of other sizes.
func checkMemfd(fd int, size uint64) (unix.Stat_t, error) {
	var st unix.Stat_t
	if _, err := sealedShmem(fd); err != nil {
		return st, err
	}
	if err := unix.Fstat(fd, &st); err != nil {
		return st, err
	}
	if st.Size < 0 || uint64(st.Size) < FDHeadroom+size {
		return st, fmt.Errorf("memfd holds %d bytes, want at least %d (%d headroom + the announced %d)", st.Size, FDHeadroom+size, FDHeadroom, size)
	}
	return st, nil
}

// maxFDMaps bounds the memfds a session keeps mapped between their messages.
const maxFDMaps = 16

// fdMap is a client's memfd the daemon keeps mapped for the memfd's next message (the Go
// client reuses its send memfds): the file mapped shared and read-only, but for its first
// page, mapped privately again for every message (it reflects what the client wrote
// since) so that the envelope written into the headroom stays the daemon's. Mapping a
// 16 MiB memfd per message cost a page fault per 16 pages and an unmapping.
type fdMap struct {
	dev, ino uint64
	mem      []byte // the whole file
	refs     int    // messages in flight from it (0 or 1: a busy memfd is mapped afresh)
	used     uint64 // when it was last taken, for eviction
}

// fdMaps is a session's cache of mapped memfds.
type fdMaps struct {
	mu     sync.Mutex
	maps   []*fdMap
	clock  uint64
	closed bool // the session ended: mappings go when their messages complete
}

var pageSize = unix.Getpagesize()

// mapFor maps the message of size bytes in memfd fd (checked: st) and returns its
// headroom and bytes, writable at the headroom, and the function that releases them. A
// memfd larger than limit bytes is not kept mapped (only the message is mapped, for its
// time): a client's sparse terabyte memfds must not use up the daemon's address space.
func (c *fdMaps) mapFor(fd int, st *unix.Stat_t, size uint64, limit int64) ([]byte, func(), error) {
	n := int(FDHeadroom + size)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	var m *fdMap
	for _, x := range c.maps {
		if x.dev == uint64(st.Dev) && x.ino == st.Ino {
			m = x
			break
		}
	}
	if m != nil && m.refs > 0 {
		m = nil // the client passed a memfd whose message is in flight: map it apart
		goto private
	}
	if m == nil && !c.closed && st.Size <= limit {
		if len(c.maps) >= maxFDMaps && !c.evictLocked() {
			goto private
		}
		mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			goto private
		}
		m = &fdMap{dev: uint64(st.Dev), ino: st.Ino, mem: mem}
		c.maps = append(c.maps, m)
	}
	if m != nil {
		// A fresh private copy of the first page: what the client wrote there since, and
		// room for the envelope no later write of the client's can change.
		if _, err := unix.MmapPtr(fd, 0, unsafe.Pointer(&m.mem[0]), uintptr(min(len(m.mem), pageSize)),
			unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED); err != nil {
			c.dropLocked(m)
			goto private
		}
		m.refs++
		m.used = c.clock
		return m.mem[:n:n], func() { c.release(m) }, nil
	}
private:
	buf, err := unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	if err != nil {
		return nil, nil, err
	}
	return buf, func() { unix.Munmap(buf) }, nil
}

// release ends m's message; once the session ended, m is unmapped.
func (c *fdMaps) release(m *fdMap) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m.refs--
	if c.closed && m.refs == 0 {
		c.dropLocked(m)
	}
}

// evictLocked unmaps the idle mapping used longest ago; false if all are busy.
func (c *fdMaps) evictLocked() bool {
	var old *fdMap
	for _, x := range c.maps {
		if x.refs == 0 && (old == nil || x.used < old.used) {
			old = x
		}
	}
	if old == nil {
		return false
	}
	c.dropLocked(old)
	return true
}

func (c *fdMaps) dropLocked(m *fdMap) {
	for i, x := range c.maps {
		if x == m {
			c.maps = append(c.maps[:i], c.maps[i+1:]...)
			break
		}
	}
	unix.Munmap(m.mem)
}

// close unmaps the idle mappings; busy ones go when their messages complete.
func (c *fdMaps) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, m := range append([]*fdMap(nil), c.maps...) {
		if m.refs == 0 {
			c.dropLocked(m)
		}
	}
}

// handleSendFD sends the message in a sealed memfd without copying it. A refused message
// gets an Error frame with its tag; the session goes on.
func (x *session) handleSendFD(tag uint32, sh SendHeader, destErr error, fd int) {
	s := x.srv
	reject := func(code uint16, text string) {
		unix.Close(fd)
		s.msgsRejected.Add(1)
		x.enqueueError(tag, code, text)
	}
	ep, r := x.admit(sh, destErr)
	if r != nil {
		reject(r.code, r.text)
		return
	}
	size := int64(sh.Size)
	st, err := checkMemfd(fd, sh.Size)
	var buf []byte
	var unmap func()
	if err == nil {
		// Kept mapped up to a page beyond the largest message the session may send.
		buf, unmap, err = x.fdMaps.mapFor(fd, &st, sh.Size, FDHeadroom+x.maxMessage()+int64(pageSize))
	}
	if err != nil {
		x.release(size)
		reject(CodeFD, err.Error())
		return
	}
	frozen := memfdWriteSealed(fd) // the client cannot change its pages: Accepted at once
	unix.Close(fd)                 // the mapping keeps the file
	if dst := s.localDst(sh); dst != nil && s.localWaiting.Load() >= maxLocalWaiting {
		unmap()
		x.release(size)
		s.msgsRejected.Add(1)
		s.outstandingRefusedTotal.Add(1)
		x.enqueueError(tag, CodeOutstanding, fmt.Sprintf("%d local messages wait for room at their receivers (the daemon's bound); try again later", maxLocalWaiting))
		return
	} else if dst != nil {
		// A local receiver gets a copy: the client's pages are free at once.
		m := getSendMsg(x, tag, envelopeLen+int(size))
		copy(m.buf[envelopeLen:], buf[FDHeadroom:])
		unmap()
		putEnvelope(m.buf, sh.Endpoint, ep)
		s.fdMsgs.Add(1) // before its Accepted and Sent frames: a client that saw them sees it counted
		x.accept(tag, false)
		x.sendLocal(m, sh, ep, dst)
		return
	}
	release := func() {
		unmap()
		x.release(size)
	}
	putEnvelope(buf, sh.Endpoint, ep)
	s.countAccepted(size, true) // before its Accepted and Sent frames, as on the local path
	if frozen {
		x.accept(tag, false)
	}
	x.track(tag, nil, nil)
	err = s.node.Send(sh.To, buf, func(r daemon.SendResult) {
		release()
		if !frozen {
			x.accept(tag, true) // the daemon is done with the client's pages
		}
		x.completed(tag, nil, r)
	})
	if err != nil {
		s.uncountAccepted(size, true)
		unmap()
		if frozen {
			x.refused(tag, nil, size, err)
			return
		}
		x.mu.Lock()
		x.untrackLocked(tag, nil)
		x.mu.Unlock()
		x.release(size)
		s.msgsRejected.Add(1)
		x.enqueueError(tag, sendErrCode(err), err.Error())
		return
	}
}

// rawWrite writes b to the non-blocking socket fd once (EAGAIN: nothing taken), without
// telling the scheduler: a scheduler-visible syscall wakes the runtime's sysmon thread.
func rawWrite(fd uintptr, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch e {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return -1, e
	}
}
