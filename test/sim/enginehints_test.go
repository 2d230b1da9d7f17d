package sim

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/smartt-transport/smartt/transport"
)

// TestEngineHints: the prefetch hints find the engine's timer heap and connection table
// by name (a rename of either field fails here, not silently in the simulator's speed),
// and the heap header they read follows the engine: empty before a connection, its first
// entry once a dialled connection waits for a deadline.
func TestEngineHints(t *testing.T) {
	ep, err := transport.NewEndpoint(transport.DefaultConfig(), rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	heap, conns := engineHints(ep)
	if heap == &noHeap || conns == 0 {
		t.Fatalf("hints not found: timer heap %v, connection table %#x", heap != &noHeap, conns)
	}
	if a := timerTop(heap); a != 0 {
		t.Fatalf("timer heap top %#x before any connection, want 0", a)
	}
	if _, err := ep.Dial(0, netip.MustParseAddrPort("10.0.0.2:23600")); err != nil {
		t.Fatal(err)
	}
	if _, ok := ep.NextTimeout(); !ok {
		t.Fatal("a dialled connection has no deadline")
	}
	if a := timerTop(heap); a == 0 || heap[1] != 1 {
		t.Fatalf("timer heap top %#x, length %d after one dial, want an entry", a, heap[1])
	}
	if _, c2 := engineHints(ep); c2 != conns {
		t.Fatalf("connection table header moved: %#x then %#x", conns, c2)
	}
}
