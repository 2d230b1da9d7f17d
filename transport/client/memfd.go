package client

import (
	"fmt"
	"net"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/transport/apitypes"
)

// MessageFD is a message built in shared memory (a memfd): write it through Data, Seal it,
// then SendFD passes the descriptor to the daemon, which sends straight from these pages.
// Use it for large messages; the daemon copies nothing.
type MessageFD struct {
	f    *os.File
	mem  []byte // the whole mapping: headroom + message
	Data []byte // the message, writable until Seal
	size int64
}

// NewMessageFD creates a message of size bytes (1 .. 1 GiB) in a new memfd.
func NewMessageFD(size int64) (*MessageFD, error) {
	if size <= 0 || size > 1<<32 {
		return nil, fmt.Errorf("message size %d: must be in 1..%d", size, int64(1)<<32)
	}
	fd, err := unix.MemfdCreate("smartt-msg", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "smartt-msg")
	total := apitypes.FDHeadroom + size
	if err := f.Truncate(total); err != nil {
		f.Close()
		return nil, err
	}
	mem, err := unix.Mmap(fd, 0, int(total), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("mmap memfd: %w", err)
	}
	return &MessageFD{f: f, mem: mem, Data: mem[apitypes.FDHeadroom:], size: size}, nil
}

// Seal makes the message immutable (F_SEAL_WRITE, F_SEAL_SHRINK, F_SEAL_GROW), as the
// daemon requires; Data is unusable afterwards.
func (m *MessageFD) Seal() error {
	if m.mem != nil {
		if err := unix.Munmap(m.mem); err != nil { // a writable shared mapping would block F_SEAL_WRITE
			return err
		}
		m.mem, m.Data = nil, nil
	}
	_, err := unix.FcntlInt(m.f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL)
	return err
}

// Size returns the message's length in bytes.
func (m *MessageFD) Size() int64 { return m.size }

// Close releases the client's descriptor (the daemon keeps its own until the message completes).
func (m *MessageFD) Close() error {
	if m.mem != nil {
		unix.Munmap(m.mem)
		m.mem, m.Data = nil, nil
	}
	return m.f.Close()
}

// SendFD passes the sealed message m to the daemon for endpoint ep at the daemon at to,
// and returns without waiting for the outcome. m may be closed once SendFD returns.
func (s *Session) SendFD(to netip.AddrPort, ep uint32, m *MessageFD) (*Pending, error) {
	uc, ok := s.conn.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("SendFD needs a Unix socket session")
	}
	tag := s.nextTag()
	ch, err := s.register(tag)
	if err != nil {
		return nil, err
	}
	payload := apitypes.SendHeader{To: to, Endpoint: ep, Size: uint64(m.size)}.Append(nil)
	frame := append(apitypes.AppendHeader(nil, apitypes.Header{Type: apitypes.FrameSendFD, Tag: tag, Len: uint32(len(payload))}), payload...)
	s.wmu.Lock()
	err = s.flushReleasesLocked()
	if err == nil {
		err = s.bw.Flush() // frames before this one go first
	}
	if err == nil {
		var n int
		n, _, err = uc.WriteMsgUnix(frame, unix.UnixRights(int(m.f.Fd())), nil)
		if err == nil && n != len(frame) {
			err = fmt.Errorf("short write of a SendFD frame: %d of %d bytes", n, len(frame))
		}
	}
	s.wmu.Unlock()
	if err != nil {
		s.unregister(tag)
		return nil, s.brokenErr(err)
	}
	return &Pending{s: s, tag: tag, ch: ch}, nil
}
