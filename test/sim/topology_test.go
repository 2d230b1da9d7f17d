package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/smartt-transport/smartt/test/switchport"
)

// Every topology routes every sampled pair over a shortest path (as many links as
// linksBetween says) for any EV, and switches have the port counts the kind promises.
func TestTopologiesRoute(t *testing.T) {
	for _, tc := range []struct {
		cfg           TopologyConfig
		sws, up, down int // switches; uplinks and host ports per ToR
	}{
		{TopologyConfig{Kind: "single", Hosts: 8}, 1, 0, 8},
		{TopologyConfig{Kind: "fattree2", Hosts: 128, Radix: 16}, 16 + 8, 8, 8},
		{TopologyConfig{Kind: "fattree2", Hosts: 128, Radix: 16, Oversubscription: 4}, 16 + 2, 2, 8},
		{TopologyConfig{Kind: "leafspine", Hosts: 48, Leaves: 4, Spines: 3}, 7, 3, 12},
		{TopologyConfig{Kind: "fattree3", Hosts: 1024, Radix: 16}, 128 + 128 + 64, 8, 8},
		{TopologyConfig{Kind: "fattree3", Hosts: 128, Radix: 8, Oversubscription: 2}, 32 + 16 + 8, 2, 4},
	} {
		tp, err := tc.cfg.build(1)
		if err != nil {
			t.Fatalf("%+v: %v", tc.cfg, err)
		}
		if len(tp.sws) != tc.sws {
			t.Fatalf("%s: %d switches, want %d", tp.description, len(tp.sws), tc.sws)
		}
		tor := &tp.sws[tp.hostUp[0]-int32(tp.hosts)]
		if len(tor.up) != tc.up || len(tor.down) != tc.down {
			t.Fatalf("%s: ToR has %d up, %d down", tp.description, len(tor.up), len(tor.down))
		}
		rng := rand.New(rand.NewPCG(1, 1))
		H := int32(tp.hosts)
		for range 2000 {
			src, dst := int32(rng.IntN(tp.hosts)), int32(rng.IntN(tp.hosts))
			if src == dst {
				continue
			}
			ev := uint16(rng.IntN(256))
			node, links := tp.hostUp[src], 1
			for node >= H {
				sw := &tp.sws[node-H]
				var out int32
				if dst >= sw.lo && dst < sw.hi {
					out = sw.down[(dst-sw.lo)/sw.span]
				} else {
					out = sw.up[switchport.Pick(switchport.Hash4(sw.salt, hostIP(int(src)), hostIP(int(dst)), 17, evBase+ev, listenPort), len(sw.up))]
				}
				node = tp.ports[out].peer
				links++
				if links > 8 {
					t.Fatalf("%s: %d->%d loops", tp.description, src, dst)
				}
			}
			if node != dst || links != tp.linksBetween(src, dst) {
				t.Fatalf("%s: %d->%d reached %d in %d links, want %d", tp.description, src, dst, node, links, tp.linksBetween(src, dst))
			}
		}
	}
	for _, bad := range []TopologyConfig{
		{Kind: "ring", Hosts: 8},
		{Kind: "fattree2", Hosts: 100, Radix: 16},
		{Kind: "fattree3", Hosts: 1024, Radix: 16, Oversubscription: 3},
		{Kind: "single", Hosts: 8, Oversubscription: 9},
	} {
		if _, err := bad.build(1); err == nil {
			t.Fatalf("%+v accepted", bad)
		}
	}
}
