package transport_test

import (
	"testing"

	"smartt/cc"
	"smartt/test/testnet"
	"smartt/transport"
)

// TestSubMTUWindowIsPaced: a window of a quarter packet sends one packet every four RTTs
// (window/srtt), not one per RTT as window accounting alone would.
func TestSubMTUWindowIsPaced(t *testing.T) {
	const delay = 10_000 // one way: RTT ~20 us
	n := testnet.New(testnet.Config{Delay: delay}, 1)
	cfg := transport.DefaultConfig()
	cfg.NewCC = func() cc.Controller { return &cc.Fixed{Bytes: cfg.MTU / 4} }
	ep, ad := twoHosts(t, n, cfg, 3)
	id, err := ep[0].Dial(0, ad[1])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ep[0].Send(0, id, make([]byte, 4<<20)); err != nil {
		t.Fatal(err)
	}
	n.Wake(ad[0])
	n.RunUntil(1_000_000, nil) // warm up: RTT samples
	before := ep[0].Stats().DataSent
	const span = 4_000_000
	n.RunUntil(1_000_000+span, nil)
	sent := float64(ep[0].Stats().DataSent - before)
	rtt := float64(2 * delay)
	want := span / (4 * rtt) // one packet per 4 RTTs
	t.Logf("%.0f packets in %d ns, want ~%.0f (unpaced: ~%.0f)", sent, span, want, span/rtt)
	if sent < 0.8*want || sent > 1.2*want {
		t.Fatalf("%.0f packets, want %.0f +- 20%%", sent, want)
	}
}
