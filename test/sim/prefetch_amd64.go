package sim

// prefetch asks the CPU to bring the cache line at addr in (a hint: any address is safe).
//
//go:noescape
func prefetch(addr uintptr)

// prefetchN prefetches the n (>= 1) cache lines from addr on.
//
//go:noescape
func prefetchN(addr uintptr, n int)
