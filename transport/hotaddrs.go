package transport

import "unsafe"

// HotAddrs returns two addresses for a driver that prefetches (the simulator, which
// runs thousands of engines and finds each one's state out of cache): the engine's
// timer fields, which NextTimeout reads first (the timer heap's header and the queues
// after it), and the header of its connection table, which HandlePacket reads first.
// Both stay valid for the engine's life (Go's heap objects do not move, and a map's
// header is allocated once); they are hints only and are never dereferenced here.
func (e *Endpoint) HotAddrs() (timers, conns uintptr) {
	return uintptr(unsafe.Pointer(&e.theap)), *(*uintptr)(unsafe.Pointer(&e.conns))
}

// TimerTopAddr returns the address of the timer heap's first entry (0: empty), a
// prefetch hint like HotAddrs; it reads the heap's header.
func (e *Endpoint) TimerTopAddr() uintptr {
	if len(e.theap) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&e.theap[0]))
}
