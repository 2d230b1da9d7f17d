// Package bufpool recycles large message buffers by size class (powers of two from 64 KiB
// to 64 MiB), so a daemon or client moving large messages does not pay a fresh zeroed
// allocation per message. Smaller and larger buffers come from the heap.
package bufpool

import (
	"math/bits"
	"sync"
)

const (
	minPooledShift = 16 // 64 KiB
	maxPooledShift = 26 // 64 MiB
)

var pools [maxPooledShift - minPooledShift + 1]sync.Pool

// poolClass returns the class of a buffer of n bytes, or -1 if n is not pooled.
func poolClass(n int) int {
	if n < 1<<minPooledShift || n > 1<<maxPooledShift {
		return -1
	}
	return bits.Len(uint(n-1)) - minPooledShift
}

// Get returns a buffer of n bytes. Its contents are whatever its previous user left:
// overwrite every byte before reading any.
func Get(n int) []byte {
	c := poolClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	if p, ok := pools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<(c+minPooledShift))
}

// Put recycles a buffer from Get; the caller must not use it afterwards. Buffers of
// other capacities are ignored.
func Put(b []byte) {
	c := poolClass(cap(b))
	if c < 0 || cap(b) != 1<<(c+minPooledShift) {
		return
	}
	full := b[:cap(b)] // not &b: that would move b to the heap on every call, pooled or not
	pools[c].Put(&full)
}
