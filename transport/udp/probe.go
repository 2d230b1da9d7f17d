package udp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// probe checks what setsockopt alone cannot tell: whether recvmmsg/sendmmsg exist.
func (c *Conn) probe() {
	if !c.caps.Batch {
		return
	}
	fam := unix.AF_INET
	if c.v6 {
		fam = unix.AF_INET6
	}
	fd, err := unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var h [1]unix.Mmsghdr
	_, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&h[0])), 1, unix.MSG_DONTWAIT, 0, 0)
	if e == unix.ENOSYS {
		c.cfg.Logger.Warn("udp: kernel has no recvmmsg/sendmmsg; one datagram per system call")
		c.caps.Batch = false
	}
}
