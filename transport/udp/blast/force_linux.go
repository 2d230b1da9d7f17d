package blast

import "golang.org/x/sys/unix"

// Linux's buffer options that pass the sysctl caps (CAP_NET_ADMIN).
const (
	soRcvbufForce = unix.SO_RCVBUFFORCE
	soSndbufForce = unix.SO_SNDBUFFORCE
)
