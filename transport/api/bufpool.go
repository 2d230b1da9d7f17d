package api

import (
	"math/bits"
	"sync"
)

// Send bodies are read into buffers recycled by size class (powers of two from 64 KiB to
// 64 MiB), so a client streaming large messages does not cost a fresh zeroed allocation
// per message; the engine holds a buffer until the message is delivered or fails, then it
// comes back here. Smaller and larger bodies use the heap.
const (
	minPooledShift = 16 // 64 KiB
	maxPooledShift = 26 // 64 MiB
)

var bodyPools [maxPooledShift - minPooledShift + 1]sync.Pool

// poolClass returns the class of a buffer of n bytes, or -1 if n is not pooled.
func poolClass(n int) int {
	if n < 1<<minPooledShift || n > 1<<maxPooledShift {
		return -1
	}
	return bits.Len(uint(n-1)) - minPooledShift
}

// getBody returns a buffer of n bytes; its contents are whatever a previous message left
// (every byte is overwritten before use).
func getBody(n int) []byte {
	c := poolClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	if p, ok := bodyPools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<(c+minPooledShift))
}

// putBody recycles a buffer from getBody.
func putBody(b []byte) {
	c := poolClass(cap(b))
	if c < 0 || cap(b) != 1<<(c+minPooledShift) {
		return
	}
	b = b[:cap(b)]
	bodyPools[c].Put(&b)
}
