package pacing

import "syscall"

// nanosleep sleeps d ns in the nanosleep system call, outside the Go timer wheel.
func nanosleep(d int64) {
	ts := syscall.NsecToTimespec(d)
	syscall.Nanosleep(&ts, nil)
}
