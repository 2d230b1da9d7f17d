//go:build linux

package netbed

import (
	"fmt"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Blaster sends fixed-size UDP datagrams from inside a host namespace in sendmmsg batches
// of 64, as fast as the kernel takes them: background load and capacity measurements.
type Blaster struct {
	fd  int
	buf []byte
	iov []unix.Iovec
	hdr []unix.Mmsghdr
}

// NewBlaster opens a UDP socket in namespace nsName, from srcPort (0: any) to dst, sending
// datagrams of size bytes.
func NewBlaster(nsName string, srcPort int, dst netip.AddrPort, size int) (*Blaster, error) {
	if size < 1 || size > 65507 {
		return nil, fmt.Errorf("blaster: size %d out of range [1, 65507]", size)
	}
	if !dst.Addr().Is4() {
		return nil, fmt.Errorf("blaster: destination %v is not IPv4", dst)
	}
	b := &Blaster{fd: -1, buf: make([]byte, size), iov: make([]unix.Iovec, 64), hdr: make([]unix.Mmsghdr, 64)}
	err := Do(nsName, func() (err error) {
		if b.fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		unix.SetsockoptInt(b.fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 8<<20)
		if err := unix.Bind(b.fd, &unix.SockaddrInet4{Port: srcPort}); err != nil {
			return err
		}
		return unix.Connect(b.fd, &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()})
	})
	if err != nil {
		if b.fd >= 0 {
			unix.Close(b.fd)
		}
		return nil, fmt.Errorf("blaster in %s: %w", nsName, err)
	}
	for i := range b.hdr {
		b.iov[i].Base = &b.buf[0]
		b.iov[i].SetLen(size)
		b.hdr[i].Hdr.Iov = &b.iov[i]
		b.hdr[i].Hdr.SetIovlen(1)
	}
	return b, nil
}

// Send sends n datagrams, or fewer if stop closes first; it returns how many went out.
func (b *Blaster) Send(n int, stop <-chan struct{}) int {
	sent := 0
	for sent < n {
		select {
		case <-stop:
			return sent
		default:
		}
		k, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(b.fd), uintptr(unsafe.Pointer(&b.hdr[0])),
			uintptr(min(len(b.hdr), n-sent)), 0, 0, 0)
		if e == 0 {
			sent += int(k)
		} // else ENOBUFS: a local queue is full; try again
	}
	return sent
}

// Close closes the socket.
func (b *Blaster) Close() error { return unix.Close(b.fd) }
