package transport

import (
	"math/bits"
	"sync"
	"unsafe"
)

// Receive buffers come in size classes, 64 and 96 bytes times powers of two up to
// RecvChunk (64, 96, 128, 192, ... 12 KiB, 16 KiB): a chunk of s bytes (a small message,
// or the last piece of a large one) takes the smallest class that holds it, so what a
// message holds is at most 1.5 times what arrived of it (rounded up to 64 bytes), and it
// is charged at the class's size (bufCap). A 2-byte message then holds 64 bytes, not a
// whole RecvChunk.
//
// Buffers are recycled through process-wide pools rather than only a per-engine free
// list, so that the goroutine that finishes with a delivered message (the daemon's API
// writer) can give its chunks back without the engine's lock. A pool holds a pointer to a
// buffer's first byte: putting a pointer in an interface does not allocate.
const (
	minClassShift = 6 // 64 bytes
	numClasses    = 2*(14-minClassShift) + 1
)

var chunkPools [numClasses]sync.Pool

// bufClass returns the class of a buffer of n bytes (1..RecvChunk).
func bufClass(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	b := bits.Len(uint(n - 1)) // 2^(b-1) < n <= 2^b
	if n <= 3<<(b-2) {
		return 2*(b-minClassShift) - 1
	}
	return 2 * (b - minClassShift)
}

// classSize returns the capacity of class c's buffers.
func classSize(c int) int {
	if c&1 == 0 {
		return 1 << (minClassShift + c/2)
	}
	return 3 << (minClassShift + (c+1)/2 - 2)
}

// bufCap is what a buffer of n bytes (1..RecvChunk) really holds: its class's size.
func bufCap(n int) uint64 { return uint64(classSize(bufClass(n))) }

// getChunk returns a buffer of size bytes (1..RecvChunk) for a message chunk, with its
// class's capacity: from the engine's own free list first (a sync.Pool is emptied by
// every garbage collection, and the engine must not allocate per packet in steady state),
// else the shared pool. It is not cleared: a message is delivered only when its own
// packets have covered every byte (coverage.go), so bytes of another message can never
// show through.
func (e *Endpoint) getChunk(size int) []byte {
	c := bufClass(size)
	if n := len(e.chunkFree[c]); n > 0 {
		ch := e.chunkFree[c][n-1]
		e.chunkFree[c][n-1] = nil
		e.chunkFree[c] = e.chunkFree[c][:n-1]
		e.chunkFreeBytes -= uint64(cap(ch))
		return ch[:size]
	}
	if p, ok := chunkPools[c].Get().(unsafe.Pointer); ok {
		return unsafe.Slice((*byte)(p), classSize(c))[:size]
	}
	return make([]byte, size, classSize(c))
}

// putChunk recycles a chunk the engine is done with: to its free list (at most
// maxFreeChunks of its class and maxFreeChunkBytes over all classes), the rest to the
// shared pool.
func (e *Endpoint) putChunk(ch []byte) {
	c, ok := chunkClass(ch)
	if !ok {
		return
	}
	if len(e.chunkFree[c]) < maxFreeChunks && e.chunkFreeBytes+uint64(cap(ch)) <= maxFreeChunkBytes {
		e.chunkFree[c] = append(e.chunkFree[c], ch[:0])
		e.chunkFreeBytes += uint64(cap(ch))
		return
	}
	chunkPools[c].Put(unsafe.Pointer(unsafe.SliceData(ch[:1])))
}

// maxFreeChunkBytes bounds the chunks an engine keeps for reuse (4 MiB: a 1 MiB message's
// chunks several times over), so that what it holds beyond its charges is a constant.
const maxFreeChunkBytes = 4 << 20

// maxFreeChunks bounds each class's free list by count: the 4 MiB alone would let a flood
// of expiring tiny messages leave 65,536 64-byte buffers (and 1.5 MiB of slice headers)
// behind for good. 256 is still 4 MiB of RecvChunk ones.
const maxFreeChunks = 256

// chunkClass returns the class of a buffer getChunk handed out (false for any other).
func chunkClass(ch []byte) (int, bool) {
	n := cap(ch)
	if n < 1<<minClassShift || n > RecvChunk {
		return 0, false
	}
	c := bufClass(n)
	return c, classSize(c) == n
}

// putChunk recycles a chunk to the shared pool.
func putChunk(ch []byte) {
	if c, ok := chunkClass(ch); ok {
		chunkPools[c].Put(unsafe.Pointer(unsafe.SliceData(ch[:1])))
	}
}

// DrainChunkPools empties the shared chunk pools and returns how many buffers they held.
// A sync.Pool keeps what it holds through one garbage collection, and an idle process
// collects none for minutes: a driver returning memory after a mass release drains them
// first, so that one collection frees the buffers.
func DrainChunkPools() int {
	n := 0
	for c := range chunkPools {
		// Bounded: buffers put back while this runs need not be drained.
		for range 1 << 22 {
			if chunkPools[c].Get() == nil {
				break
			}
			n++
		}
	}
	return n
}

// PutChunks gives the chunks of a message delivered in Event.Chunks back for reuse, and
// the table that lists them; the caller must not touch either afterwards (a second call
// right after the first does nothing).
func PutChunks(chunks [][]byte) {
	if len(chunks) > 0 && unsafe.SliceData(chunks[0]) == &tableMark[0] {
		return // given back already
	}
	for i, ch := range chunks {
		putChunk(ch)
		chunks[i] = nil
	}
	putTable(chunks)
}

// tablePool recycles chunk tables of tableKeep slots (a message record's own, which holds
// a message of up to 64 KiB): a message delivered in chunks takes its table with it
// (Event.Chunks), and without the pool its record would allocate a new one for the next
// message, once per message. Like chunkPools it holds a pointer to the first slot.
var tablePool sync.Pool

// tableMark fills the first slot of a table in tablePool, so that PutChunks can tell a
// table it was given already.
var tableMark = []byte{0}

// putTable recycles an empty chunk table (all slots nil) of tableKeep slots; others are
// left to the garbage collector.
func putTable(t [][]byte) {
	if cap(t) != tableKeep {
		return
	}
	t = t[:tableKeep]
	clear(t)
	t[0] = tableMark[:0]
	tablePool.Put(unsafe.Pointer(unsafe.SliceData(t)))
}

// getTable returns a chunk table of n slots (at most tableKeep), all nil, with capacity
// tableKeep: a recycled one if there is one.
func getTable(n int) [][]byte {
	if p, ok := tablePool.Get().(unsafe.Pointer); ok {
		t := unsafe.Slice((*[]byte)(p), tableKeep)
		t[0] = nil
		return t[:n]
	}
	return make([][]byte, n, tableKeep)
}
