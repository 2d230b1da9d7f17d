package wire

import (
	"encoding/binary"
	"testing"
)

// TestShardReturnedHeader: a returned header (FlagTrimmed|FlagReturned DATA, addresses
// swapped) goes to the shard its SrcConn (our own ID) names, not the peer's DstConn; a
// trimmed header that was not returned, or another type with those bits, still goes by
// DstConn.
func TestShardReturnedHeader(t *testing.T) {
	for _, n := range []int{2, 4, 7, 256} {
		for v := 0; v < 256; v++ {
			b := make([]byte, DataHdrLen)
			b[0], b[1] = Version<<4|byte(TypeData), byte(FlagTrimmed|FlagReturned)
			binary.BigEndian.PutUint64(b[8:], 0x1234_5678_9abc_de00|uint64(255-v)) // the peer's ID
			binary.BigEndian.PutUint64(b[16:], 0x0fed_cba9_8765_4300|uint64(v))    // ours
			if got := Shard(b, n); got != v%n {
				t.Fatalf("n=%d: returned header of our ID ...%02x steered to %d, want %d", n, v, got, v%n)
			}
			b[1] = byte(FlagTrimmed)
			if got := Shard(b, n); got != (255-v)%n {
				t.Fatalf("n=%d: trimmed (not returned) header steered to %d, want DstConn's %d", n, got, (255-v)%n)
			}
			b[0], b[1] = Version<<4|byte(TypeAck), byte(FlagTrimmed|FlagReturned)
			if got := Shard(b, n); got != (255-v)%n {
				t.Fatalf("n=%d: ACK with those flag bits steered to %d, want DstConn's %d", n, got, (255-v)%n)
			}
		}
	}
}
