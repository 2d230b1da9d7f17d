//go:build !linux

package blast

import "golang.org/x/sys/unix"

// Elsewhere there is no forcing: the plain options, within the system's caps.
const (
	soRcvbufForce = unix.SO_RCVBUF
	soSndbufForce = unix.SO_SNDBUF
)
