package transport_test

import (
	"crypto/sha256"
	"math/rand/v2"
	"testing"

	"github.com/smartt-transport/smartt/test/testnet"
	"github.com/smartt-transport/smartt/transport"
)

// TestOneGiBMessage moves the largest default message (1 GiB) over a network with a
// little loss and reordering and checks it arrives whole and intact.
func TestOneGiBMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("1 GiB transfer skipped in -short mode")
	}
	const size = 1 << 30
	msg := make([]byte, size)
	rng := rand.New(rand.NewPCG(5, 5))
	for i := 0; i < size; i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8; j++ {
			msg[i+j] = byte(v >> (8 * j))
		}
	}
	want := sha256.Sum256(msg)
	n := testnet.New(testnet.Config{Delay: 2000, Loss: 0.001, ReorderProb: 0.01, ReorderDepth: 20}, 3)
	cfg := transport.DefaultConfig()
	cfg.MinRTO, cfg.InitialRTO = 50_000, 100_000
	ep, ad := twoHosts(t, n, cfg, 9)
	id, _ := ep[0].Dial(0, ad[1])
	if _, err := ep[0].Send(0, id, msg); err != nil {
		t.Fatal(err)
	}
	n.Wake(ad[0])
	var got []byte
	sent := false
	ok := n.RunUntil(100_000_000_000, func() bool {
		forEvents(ep[1], func(ev transport.Event) {
			if ev.Kind == transport.MessageReceived {
				got = ev.Data
			}
		})
		forEvents(ep[0], func(ev transport.Event) {
			if ev.Kind == transport.MessageSent {
				sent = true
			}
			if ev.Kind == transport.MessageFailed {
				t.Errorf("failed: %v", ev.Err)
			}
		})
		return got != nil && sent
	})
	if !ok {
		t.Fatalf("1 GiB message not delivered: %+v", ep[1].Stats())
	}
	if len(got) != size || sha256.Sum256(got) != want {
		t.Fatal("1 GiB message corrupted")
	}
	s := ep[0].Stats()
	t.Logf("1 GiB in %.2f ms virtual: %d data packets, retx sack/rto %d/%d", float64(n.Now())/1e6, s.DataSent, s.RetxSack, s.RetxTimeout)
}
