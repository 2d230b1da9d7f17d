//go:build !linux

package api

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Elsewhere than Linux: no close-on-exec flags on these calls, no forced buffer sizes.
const (
	sockCloexec    = 0
	msgCmsgCloexec = 0
	soSndbufForce  = unix.SO_SNDBUF
)

// errNoMemfd: memfds, and so MessageFD and receive rings, are Linux's.
var errNoMemfd = errors.New("api: memfd: not supported on this OS (Linux only)")

// errNoPeerCred: SO_PEERCRED is Linux's.
var errNoPeerCred = errors.New("api: SO_PEERCRED: not supported on this OS (Linux only)")

func sealedShmem(int) (int, error) { return 0, errNoMemfd }

func writeSealed(int) bool { return false }

func memfdWriteSealed(int) bool { return false }

func sockPeerCred(uintptr) (PeerCred, error) { return PeerCred{}, errNoPeerCred }
