package api

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Linux's socket flags and memfd seals, which the daemon's fd-passing paths use.
const (
	sockCloexec    = unix.SOCK_CLOEXEC
	msgCmsgCloexec = unix.MSG_CMSG_CLOEXEC
	soSndbufForce  = unix.SO_SNDBUFFORCE
	sealShrink     = unix.F_SEAL_SHRINK
	sealGrow       = unix.F_SEAL_GROW
	sealWrites     = unix.F_SEAL_WRITE | unix.F_SEAL_FUTURE_WRITE
	tmpfsMagic     = unix.TMPFS_MAGIC
)

// memfdSeals is memfd fd's seals (an error if fd is not a memfd).
func memfdSeals(fd int) (int, error) { return unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0) }

// sockPeerCred is the identity of the process at the other end of Unix socket fd.
func sockPeerCred(fd uintptr) (PeerCred, error) {
	c, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	if err != nil {
		return PeerCred{}, err
	}
	return PeerCred{PID: c.Pid, UID: c.Uid, GID: c.Gid}, nil
}
