//go:build !linux

package client

import (
	"errors"
	"fmt"
)

// mapPopulate is Linux's; elsewhere pages fault in on first touch.
const mapPopulate = 0

// errNoMemfd: memfds (and so SendFD and the daemon, which runs on Linux) are Linux's.
var errNoMemfd = fmt.Errorf("memfd: %w on this system (Linux only)", errors.ErrUnsupported)

func memfdCreate(string) (int, error) { return -1, errNoMemfd }

func sealAll(uintptr) error { return errNoMemfd }

func sealSize(uintptr) error { return errNoMemfd }

func fallocate(int, int64) error { return errNoMemfd }

// bytesReadable reports 1, so a busy poll ends at once and the read blocks instead.
func bytesReadable(uintptr) int { return 1 }

// msgCmsgCloexec is Linux's recvmsg flag; elsewhere none (descriptors are not passed).
const msgCmsgCloexec = 0
