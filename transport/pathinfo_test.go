package transport

import (
	"net/netip"
	"testing"
)

// TestSetPathHops: the hop count reaches a controller that takes it (SMaRTT, Swift), is
// refused for one that does not (the fixed window), for an unknown connection, and
// outside 0..MaxPathHops.
func TestSetPathHops(t *testing.T) {
	for _, tc := range []struct {
		cc   string
		want bool
	}{{"smartt", true}, {"smartt-fixed", true}, {"swift", true}, {"fixed", false}} {
		cfg := DefaultConfig()
		cfg.CC = tc.cc
		e := newEndpoint(t, cfg)
		id, err := e.Dial(0, netip.MustParseAddrPort("10.0.0.2:4791"))
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range []struct {
			hops int
			ok   bool
		}{{0, tc.want}, {3, tc.want}, {MaxPathHops, tc.want}, {-1, false}, {MaxPathHops + 1, false}} {
			if got := e.SetPathHops(id, h.hops); got != h.ok {
				t.Errorf("cc %s: SetPathHops(%d) = %v, want %v", tc.cc, h.hops, got, h.ok)
			}
		}
		if e.SetPathHops(id+1, 1) {
			t.Errorf("cc %s: unknown connection accepted", tc.cc)
		}
	}
}
