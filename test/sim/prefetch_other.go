//go:build !amd64

package sim

// prefetch is a no-op where no prefetch instruction is wired up.
func prefetch(addr uintptr) {}

// prefetch3 is a no-op where no prefetch instruction is wired up.
func prefetch3(addr uintptr) {}
