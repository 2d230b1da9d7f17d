package transport_test

import (
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/test/testnet"
	"github.com/smartt-transport/smartt/transport"
)

// TestSubMTUWindowIsPaced: a window of a quarter packet sends one packet every four RTTs
// (window/srtt), not one per RTT as window accounting alone would.
func TestSubMTUWindowIsPaced(t *testing.T) {
	const delay = 10_000 // one way: RTT ~20 us
	n := testnet.New(testnet.Config{Delay: delay}, 1)
	cfg := transport.DefaultConfig()
	newCC := func() cc.Controller { return &cc.Fixed{Bytes: cfg.MTU / 4} }
	ep, ad := twoHosts(t, n, cfg, 3, transport.Hooks{NewCC: newCC})
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

// rateCC paces at a fixed rate with an open window and counts the bytes acknowledged
// from time from on.
type rateCC struct {
	cc.Fixed
	rate  int64
	from  int64
	acked int64
}

func (r *rateCC) PacingRate() int64 { return r.rate }

func (r *rateCC) OnAck(a cc.Ack) {
	if a.Now >= r.from {
		r.acked += int64(a.Bytes)
	}
}

// TestEDTAcrossConnections: connections of one endpoint paced at different rates each get
// their own rate: the engine's NextTimeout is the earliest departure over all of them.
func TestEDTAcrossConnections(t *testing.T) {
	n := testnet.New(testnet.Config{Delay: 2_000}, 1)
	cfg := transport.DefaultConfig()
	rates := []int64{125_000_000, 250_000_000, 500_000_000} // 1, 2, 4 Gbit/s
	const from, span = 200_000, 2_000_000
	var ctls []*rateCC
	newCC := func() cc.Controller {
		c := &rateCC{Fixed: cc.Fixed{Bytes: 1 << 30}, rate: rates[len(ctls)%len(rates)], from: from}
		ctls = append(ctls, c)
		return c
	}
	ep, ad := twoHosts(t, n, cfg, 5, transport.Hooks{NewCC: newCC})
	for range rates {
		id, err := ep[0].Dial(0, ad[1])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ep[0].Send(0, id, make([]byte, 8<<20)); err != nil {
			t.Fatal(err)
		}
	}
	n.Wake(ad[0])
	n.RunUntil(from+span, nil)
	if len(ctls) < len(rates) {
		t.Fatalf("%d controllers", len(ctls))
	}
	for i := range rates {
		got := float64(ctls[i].acked) * 1e9 / span
		t.Logf("conn %d: %.3g B/s of %d", i, got, rates[i])
		if got < 0.97*float64(rates[i]) || got > 1.03*float64(rates[i]) {
			t.Errorf("conn %d: %.3g B/s, want %d +- 3%%", i, got, rates[i])
		}
	}
}
