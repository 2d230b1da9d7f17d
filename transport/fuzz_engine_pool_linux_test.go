//go:build linux

package transport

import (
	"strconv"
	"syscall"
)

// fuzzMmapMin is the size from which fuzzPool maps a receive buffer instead of taking it
// from the Go heap: a buffer of a claimed 1 GiB message then costs address space and the
// pages actually written, not a 1 GiB zeroed heap object per iteration, and a buffer the
// engine touches after giving it away (Put, or delivered) faults instead of passing silently.
const fuzzMmapMin = 64 << 10

func fuzzMap(n int) ([]byte, bool) {
	if n < fuzzMmapMin {
		return make([]byte, n), false
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_ANON|syscall.MAP_PRIVATE|syscall.MAP_NORESERVE)
	if err != nil {
		panic(fzEnvError("mmap of a " + strconv.Itoa(n) + "-byte receive buffer: " + err.Error()))
	}
	return b, true
}

func fuzzUnmap(b []byte) {
	if err := syscall.Munmap(b); err != nil {
		panic("FuzzEngine: munmap: " + err.Error())
	}
}
