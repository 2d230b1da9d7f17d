package transport

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

// TestIDShards checks that every local connection ID names its shard in its low byte,
// for every shard count up to 256 and for dialled and accepted connections alike.
func TestIDShards(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := uint64(2); n <= 256; n++ {
		for s := uint64(0); s < n; s++ {
			for i := 0; i < 8; i++ {
				id := withShard(rng.Uint64(), n, s)
				if id&0xff%n != s || ShardOfID(ConnID(id), int(n)) != int(s) {
					t.Fatalf("n=%d shard=%d: id %#x names shard %d", n, s, id, id&0xff%n)
				}
			}
		}
	}
	cfg := DefaultConfig()
	cfg.ListenPort = 23600
	a, err := NewEndpoint(cfg, rand.New(rand.NewPCG(3, 4)), Hooks{IDShards: 3, IDShard: 2})
	if err != nil {
		t.Fatal(err)
	}
	peer := netip.MustParseAddrPort("10.0.0.2:23600")
	for i := 0; i < 100; i++ {
		id, err := a.Dial(0, peer)
		if err != nil {
			t.Fatal(err)
		}
		if ShardOfID(id, 3) != 2 {
			t.Fatalf("dialled id %#x names shard %d, want 2", uint64(id), ShardOfID(id, 3))
		}
	}
	for _, bad := range [][2]int{{-1, 0}, {257, 0}, {2, 2}, {1, 1}, {0, 1}} {
		h := Hooks{IDShards: bad[0], IDShard: bad[1]}
		if _, err := NewEndpoint(DefaultConfig(), nil2(), h); err == nil || !strings.Contains(err.Error(), "id shards") {
			t.Errorf("IDShards %d, IDShard %d: no validation error", bad[0], bad[1])
		}
	}
}
