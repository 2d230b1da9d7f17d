package api

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Linux's socket flags, which the daemon's fd-passing paths use.
const (
	sockCloexec    = unix.SOCK_CLOEXEC
	msgCmsgCloexec = unix.MSG_CMSG_CLOEXEC
	soSndbufForce  = unix.SO_SNDBUFFORCE
)

// sealedShmem checks that fd is a memfd on shmem (not hugetlb) sealed against shrinking
// and growing, and returns its seals; writeSealed says whether those forbid writes.
func sealedShmem(fd int) (int, error) {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return 0, fmt.Errorf("not a memfd (F_GET_SEALS: %v)", err)
	}
	const need = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW
	if seals&need != need {
		return seals, fmt.Errorf("memfd not sealed: seals 0x%x, need F_SEAL_SHRINK|F_SEAL_GROW (0x%x)", seals, need)
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return seals, fmt.Errorf("fstatfs: %w", err)
	}
	if fs.Type != unix.TMPFS_MAGIC {
		return seals, fmt.Errorf("memfd on filesystem 0x%x, want shmem (0x%x): no hugetlb memfds", fs.Type, unix.TMPFS_MAGIC)
	}
	return seals, nil
}

// writeSealed reports whether seals forbid writes (F_SEAL_WRITE or F_SEAL_FUTURE_WRITE).
func writeSealed(seals int) bool {
	return seals&(unix.F_SEAL_WRITE|unix.F_SEAL_FUTURE_WRITE) != 0
}

// memfdWriteSealed reports whether memfd fd is sealed against writes.
func memfdWriteSealed(fd int) bool {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	return err == nil && writeSealed(seals)
}

// sockPeerCred is the identity of the process at the other end of Unix socket fd.
func sockPeerCred(fd uintptr) (PeerCred, error) {
	c, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	if err != nil {
		return PeerCred{}, err
	}
	return PeerCred{PID: c.Pid, UID: c.Uid, GID: c.Gid}, nil
}
