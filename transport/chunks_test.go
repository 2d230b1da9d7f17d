package transport

import "testing"

// TestChunkFreeListBounded: an engine keeps at most maxFreeChunks buffers of a class
// (the 4 MiB byte bound alone let 65,536 64-byte ones stay behind a tiny-message flood),
// the rest go to the shared pool, and DrainChunkPools empties that pool.
func TestChunkFreeListBounded(t *testing.T) {
	e := &Endpoint{}
	const n = 3 * maxFreeChunks
	for range n {
		e.putChunk(make([]byte, 2, 64))
	}
	if l := len(e.chunkFree[0]); l != maxFreeChunks || e.chunkFreeBytes != maxFreeChunks*64 {
		t.Fatalf("free list holds %d 64-byte chunks (%d bytes), want %d", l, e.chunkFreeBytes, maxFreeChunks)
	}
	for range maxFreeChunks + 1 { // the class's bound: no more, whatever the byte bound leaves
		e.putChunk(make([]byte, 0, 64))
	}
	if l := len(e.chunkFree[0]); l != maxFreeChunks {
		t.Fatalf("free list grew to %d", l)
	}
	DrainChunkPools()
	for range 10 {
		putChunk(make([]byte, 0, 96))
	}
	if got := DrainChunkPools(); got == 0 || got > 10 {
		t.Fatalf("DrainChunkPools took %d buffers, want 1..10 (the pool may drop some)", got)
	}
	if got := DrainChunkPools(); got != 0 {
		t.Fatalf("the pools still held %d buffers after a drain", got)
	}
}
