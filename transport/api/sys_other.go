//go:build !linux

package api

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Elsewhere than Linux: no close-on-exec flags on these calls, no forced buffer sizes, and
// the seals take Linux's values only so the checks compile (memfdSeals always fails).
const (
	sockCloexec    = 0
	msgCmsgCloexec = 0
	soSndbufForce  = unix.SO_SNDBUF
	sealShrink     = 0x2
	sealGrow       = 0x4
	sealWrites     = 0x8 | 0x10
	tmpfsMagic     = 0x01021994
)

// errNoMemfd: memfds, and so MessageFD and receive rings, are Linux's.
var errNoMemfd = errors.New("api: memfd: not supported on this OS (Linux only)")

// errNoPeerCred: SO_PEERCRED is Linux's.
var errNoPeerCred = errors.New("api: SO_PEERCRED: not supported on this OS (Linux only)")

func memfdSeals(int) (int, error) { return 0, errNoMemfd }

func sockPeerCred(uintptr) (PeerCred, error) { return PeerCred{}, errNoPeerCred }
