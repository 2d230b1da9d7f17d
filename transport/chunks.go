package transport

import "sync"

// Receive chunks are recycled through a process-wide pool rather than a per-engine free
// list, so that the goroutine that finishes with a delivered message (the daemon's API
// writer) can give its chunks back without the engine's lock. A chunk is a *[RecvChunk]byte
// in the pool: putting a pointer in an interface does not allocate.
var chunkPool = sync.Pool{New: func() any { return new([RecvChunk]byte) }}

// getChunk returns a buffer of size bytes (at most RecvChunk) for a message chunk. It is
// not cleared: a message is delivered only when its own packets have covered every byte
// (coverage.go), so bytes of another message can never show through.
func getChunk(size int) []byte {
	return chunkPool.Get().(*[RecvChunk]byte)[:size]
}

// putChunk recycles a chunk from getChunk.
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
