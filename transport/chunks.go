package transport

import "sync"

// Receive chunks are recycled through a process-wide pool rather than a per-engine free
// list, so that the goroutine that finishes with a delivered message (the daemon's API
// writer) can give its chunks back without the engine's lock. A chunk is a *[RecvChunk]byte
// in the pool: putting a pointer in an interface does not allocate.
var chunkPool = sync.Pool{New: func() any { return new([RecvChunk]byte) }}

// getChunk returns a buffer of size bytes (at most RecvChunk) for a message chunk: from
// the engine's own free list first (a sync.Pool is emptied by every garbage collection,
// and the engine must not allocate per packet in steady state), else the shared pool. It
// is not cleared: a message is delivered only when its own packets have covered every
// byte (coverage.go), so bytes of another message can never show through.
func (e *Endpoint) getChunk(size int) []byte {
	if n := len(e.chunkFree); n > 0 {
		ch := e.chunkFree[n-1]
		e.chunkFree = e.chunkFree[:n-1]
		return ch[:size]
	}
	return chunkPool.Get().(*[RecvChunk]byte)[:size]
}

// putChunk recycles a chunk the engine is done with: to its free list (at most
// maxFreeChunks, 4 MiB), the rest to the shared pool.
func (e *Endpoint) putChunk(ch []byte) {
	if cap(ch) != RecvChunk {
		return
	}
	if len(e.chunkFree) < maxFreeChunks {
		e.chunkFree = append(e.chunkFree, ch[:0])
		return
	}
	putChunk(ch)
}

const maxFreeChunks = 256

// putChunk recycles a chunk to the shared pool.
func putChunk(ch []byte) {
	if cap(ch) == RecvChunk {
		chunkPool.Put((*[RecvChunk]byte)(ch[:RecvChunk]))
	}
}

// PutChunks gives the chunks of a message delivered in Event.Chunks back for reuse; the
// caller must not touch them afterwards.
func PutChunks(chunks [][]byte) {
	for i, ch := range chunks {
		putChunk(ch)
		chunks[i] = nil
	}
}
