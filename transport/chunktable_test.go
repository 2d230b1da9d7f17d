package transport

import "testing"

// TestChunksDeliveryAllocatesNothing: in the daemon's delivery mode (DeliverChunks) a
// message's chunk table goes to the consumer with its chunks and comes back with them
// (PutChunks), so that a 4 KiB message, data packet and ACK, allocates nothing in steady
// state (its record took a new table per message before); a 1 MiB message's larger
// tables are at most a few allocations per 256 packets.
func TestChunksDeliveryAllocatesNothing(t *testing.T) {
	for _, tc := range []struct {
		size int
		max  float64
	}{{4096, 0}, {1 << 20, 0.05}} {
		r := newThroughputRig(t, tc.size, DefaultConfig(), Hooks{DeliverChunks: true})
		for range 10000 {
			r.step()
		}
		if a := testing.AllocsPerRun(2560, r.step); a > tc.max {
			t.Errorf("%d-byte messages in chunks: %.3f allocations per packet, want at most %.2f", tc.size, a, tc.max)
		}
	}
}

// TestPutChunksTwice: a table given back twice goes to the pool once, so two messages
// never share it; a table of another size is not pooled.
func TestPutChunksTwice(t *testing.T) {
	e := &Endpoint{}
	tbl := getTable(2)
	tbl[0], tbl[1] = e.getChunk(RecvChunk), e.getChunk(100)
	PutChunks(tbl)
	PutChunks(tbl)
	a, b := getTable(1), getTable(1)
	if &a[:1][0] == &b[:1][0] {
		t.Fatal("one table handed out twice")
	}
	for _, x := range [][][]byte{a, b} {
		if cap(x) != tableKeep || len(x) != 1 || x[:tableKeep][0] != nil || x[:tableKeep][1] != nil {
			t.Fatalf("table len %d cap %d, slots %v: want 1, %d, all nil", len(x), cap(x), x[:cap(x)], tableKeep)
		}
	}
	PutChunks(make([][]byte, 5)) // not a record's size: left to the garbage collector
}
