//go:build !linux

package sim

// threadCPU returns 0: thread CPU clocks are read on Linux only.
func threadCPU() int64 { return 0 }
