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

// Read reads bytes and keeps the descriptors that came with them.
func (r *fdReader) Read(p []byte) (int, error) {
	n, oobn, flags, _, err := r.uc.ReadMsgUnix(p, r.oob)
	n = max(n, 0) // -1 with some errors (a closed connection)
	if oobn > 0 {
		r.collect(r.oob[:oobn])
	}
	if flags&unix.MSG_CTRUNC != 0 {
		r.setBad(errors.New("descriptors truncated: too many passed at once"))
	}
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
				n, _, e := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&r.msg)), unix.MSG_CMSG_CLOEXEC)
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

// mapMemfd checks that fd is a memfd sealed against shrinking and growing of at least
// FDHeadroom+size bytes, and maps that much of it copy-on-write: the daemon writes its
// envelope into the headroom (one private page), the rest stays the client's pages. The
// seals keep the pages from going away under the mapping (a truncated file would fault
// the daemon). A seal against writes is not required: the daemon only sends the bytes
// and relies on none of them, so a client that writes into a memfd whose message is in
// flight garbles only that message (the Go client reuses its memfds once the outcome
// arrived); a larger file lets a client reuse one memfd for messages of other sizes.
func mapMemfd(fd int, size uint64) ([]byte, error) {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("not a memfd (F_GET_SEALS: %v)", err)
	}
	const need = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW
	if seals&need != need {
		return nil, fmt.Errorf("memfd not sealed: seals 0x%x, need F_SEAL_SHRINK|F_SEAL_GROW (0x%x)", seals, need)
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return nil, err
	}
	if fs.Type != unix.TMPFS_MAGIC { // the envelope's copy-on-write of a hugetlb page can fault
		return nil, fmt.Errorf("memfd on filesystem 0x%x, want shmem (0x%x): no hugetlb memfds", fs.Type, unix.TMPFS_MAGIC)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Size < 0 || uint64(st.Size) < FDHeadroom+size {
		return nil, fmt.Errorf("memfd holds %d bytes, want at least %d (%d headroom + the announced %d)", st.Size, FDHeadroom+size, FDHeadroom, size)
	}
	return unix.Mmap(fd, 0, int(FDHeadroom+size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
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
	buf, err := mapMemfd(fd, sh.Size)
	if err != nil {
		x.release(size)
		reject(CodeFD, err.Error())
		return
	}
	release := func() {
		unix.Munmap(buf)
		unix.Close(fd)
		x.release(size)
	}
	putEnvelope(buf, sh.Endpoint, ep)
	err = s.node.Send(sh.To, buf, func(r daemon.SendResult) {
		release()
		x.completed(tag, r)
	})
	if err != nil {
		release()
		s.msgsRejected.Add(1)
		x.enqueueError(tag, sendErrCode(err), err.Error())
		return
	}
	s.msgsAccepted.Add(1)
	s.bytesAccepted.Add(uint64(size))
	s.fdMsgs.Add(1)
}
