package sim

// prefetch asks the CPU to bring the cache line at addr in (a hint: any address is safe).
//
//go:noescape
func prefetch(addr uintptr)

// prefetch3 prefetches the three cache lines from addr on.
//
//go:noescape
func prefetch3(addr uintptr)
