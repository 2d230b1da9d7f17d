package transport

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/reedsolomon"
)

// The engine's tests link the erasure code themselves: transport/ec, which registers it
// in programs, imports this package. One code per shape, built once: reedsolomon.New
// inverts a (k+m) x k matrix, 0.1-0.2 s for FuzzEngine's largest shapes per endpoint, which
// left a fuzz worker busy past -fuzztime ("context deadline exceeded"). The shared code is
// called under a lock (the library does not promise concurrent use); it keeps no state
// between calls (no inversion cache), so sharing it changes no result.
func init() {
	var mu sync.Mutex
	codes := map[[2]int]ECCoder{}
	RegisterECCodec(func(k, m int) (ECCoder, error) {
		mu.Lock()
		defer mu.Unlock()
		if c, ok := codes[[2]int{k, m}]; ok {
			return c, nil
		}
		rs, err := reedsolomon.New(k, m, reedsolomon.WithMaxGoroutines(1), reedsolomon.WithInversionCache(false))
		if err != nil {
			return nil, err
		}
		c := &lockedCoder{rs: rs}
		codes[[2]int{k, m}] = c
		return c, nil
	})
}

// lockedCoder is a code shared by the tests' endpoints, one call at a time.
type lockedCoder struct {
	mu sync.Mutex
	rs reedsolomon.Encoder
}

func (c *lockedCoder) EncodeIdx(d []byte, idx int, parity [][]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rs.EncodeIdx(d, idx, parity)
}

func (c *lockedCoder) ReconstructData(shards [][]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rs.ReconstructData(shards)
}

// A program that does not link the erasure code (the operator CLI's demo) refuses
// recovery mode "ec" when it makes an endpoint, naming the key and the programs that have
// it; Validate accepts the config, which smarttd runs.
func TestECUnlinkedRefused(t *testing.T) {
	saved := ecNew
	defer func() { ecNew = saved }()
	ecNew = nil
	cfg := DefaultConfig()
	cfg.Recovery.Mode = RecoveryEC
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate of an ec config: %v", err)
	}
	_, err := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2)))
	if err == nil || !strings.Contains(err.Error(), `recovery.mode = "ec"`) || !strings.Contains(err.Error(), "smarttd") {
		t.Errorf("NewEndpoint with ec unlinked: %v", err)
	}
	cfg.Recovery.Mode = RecoverySACK
	if _, err := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2))); err != nil {
		t.Errorf("NewEndpoint with sack and ec unlinked: %v", err)
	}
}
