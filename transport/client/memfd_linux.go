package client

import "golang.org/x/sys/unix"

// mapPopulate pre-faults a send memfd's pages at mmap.
const mapPopulate = unix.MAP_POPULATE

// memfdCreate creates a sealable, close-on-exec memfd.
func memfdCreate(name string) (int, error) {
	return unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
}

// sealAll makes a memfd immutable, as the daemon requires of a MessageFD.
func sealAll(fd uintptr) error {
	_, err := unix.FcntlInt(fd, unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL)
	return err
}

// sealSize fixes a memfd's size, leaving it writable (the send pool's buffers).
func sealSize(fd uintptr) error {
	_, err := unix.FcntlInt(fd, unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL)
	return err
}

// fallocate allocates a memfd's size bytes now (charged to this process).
func fallocate(fd int, size int64) error { return unix.Fallocate(fd, 0, 0, size) }

// bytesReadable is what the socket fd holds to read (0 on error).
func bytesReadable(fd uintptr) int {
	n, _ := unix.IoctlGetInt(int(fd), unix.TIOCINQ)
	return n
}

// msgCmsgCloexec marks descriptors received with recvmsg close-on-exec.
const msgCmsgCloexec = unix.MSG_CMSG_CLOEXEC
