package api

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// DefaultSocketBuffer is api.socket_buffer's default: 4 MiB, where fewer wake-ups per
// byte stop paying on the veth benchmark (docs/datapath.md).
const DefaultSocketBuffer = 4 << 20

const (
	minSocketBuffer = 4 << 10
	maxSocketBuffer = 64 << 20
)

// SetSendBuffer sets conn's kernel send buffer to n bytes, past net.core.wmem_max if the
// process may (SO_SNDBUFFORCE, CAP_NET_ADMIN), else as far as that cap allows, and
// returns the size the kernel reports (twice what it grants the data, for its
// bookkeeping), or 0 if conn has no socket to set.
func SetSendBuffer(conn net.Conn, n int) int {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	got := 0
	rc.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, soSndbufForce, n) != nil {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, n)
		}
		got, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
	})
	return got
}
