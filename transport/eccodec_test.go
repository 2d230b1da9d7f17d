package transport

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/klauspost/reedsolomon"
)

// The engine's tests link the erasure code themselves: transport/ec, which registers it
// in programs, imports this package.
func init() {
	RegisterECCodec(func(k, m int) (ECCoder, error) {
		return reedsolomon.New(k, m, reedsolomon.WithMaxGoroutines(1), reedsolomon.WithInversionCache(false))
	})
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
