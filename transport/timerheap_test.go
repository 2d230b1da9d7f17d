package transport

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// checkHeap fails unless the timer heap holds exactly the live connections, ordered by
// deadline, and NextTimeout equals the minimum over all of them.
func checkHeap(t *testing.T, e *Endpoint) {
	t.Helper()
	if len(e.theap) != len(e.list) {
		t.Fatalf("heap holds %d connections, %d live", len(e.theap), len(e.list))
	}
	min := int64(math.MaxInt64)
	for i, c := range e.theap {
		if int(c.hidx) != i || c.dead {
			t.Fatalf("heap slot %d: hidx %d dead %v", i, c.hidx, c.dead)
		}
		if i > 0 && e.theap[(i-1)/2].dl > c.dl {
			t.Fatalf("heap order broken at %d", i)
		}
		min = minInt(min, c.dl)
	}
	if e.twQueue.len() > 0 {
		min = minInt(min, e.twQueue.peek().expiry)
	}
	d, ok := e.NextTimeout()
	if ok != (min != math.MaxInt64) || (ok && d != min) {
		t.Fatalf("NextTimeout %d %v, brute force %d", d, ok, min)
	}
}

func minInt(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

// With hundreds of connections sending, timing out, closing and aborting in random
// order, the heap stays exact.
func TestTimerHeapMatchesScan(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PSNWindow = 256
	e, err := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, cfg.MTU+256)
	msg := make([]byte, 20000)
	var ids []ConnID
	now := int64(1)
	for step := range 5000 {
		now += rng.Int64N(50_000)
		switch r := rng.IntN(10); {
		case r < 3 || len(ids) == 0:
			peer := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(step >> 8), byte(step)}), 23600)
			id, err := e.Dial(now, peer)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		case r < 6:
			_, _ = e.Send(now, ids[rng.IntN(len(ids))], msg[:1+rng.IntN(len(msg)-1)])
		case r < 7:
			_ = e.Close(now, ids[rng.IntN(len(ids))])
		case r < 8:
			_ = e.Abort(now, ids[rng.IntN(len(ids))])
		default:
			if d, ok := e.NextTimeout(); ok && d <= now {
				e.HandleTimeout(now)
			}
		}
		for {
			if _, ok := e.PollTransmit(now, buf); !ok {
				break
			}
		}
		for {
			if _, ok := e.PollEvent(); !ok {
				break
			}
		}
		checkHeap(t, e)
	}
	if e.Stats().Timeouts == 0 || e.Stats().ConnsAborted == 0 {
		t.Fatalf("the run exercised no timeouts or aborts: %+v", e.Stats())
	}
}
