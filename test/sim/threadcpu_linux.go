package sim

import (
	"syscall"
	"unsafe"
)

// threadCPU returns the calling thread's CPU time, ns (the goroutine must be locked to
// its thread).
func threadCPU() int64 {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}
