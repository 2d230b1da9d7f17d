package transport_test

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/smartt-transport/smartt/test/testnet"
	"github.com/smartt-transport/smartt/transport"
)

// twoHosts attaches two endpoints with cfg to n at 10.0.0.1 and 10.0.0.2, their random
// sources seeded from seed, and hooks (at most one) passed to both.
func twoHosts(t testing.TB, n *testnet.Network, cfg transport.Config, seed uint64, hooks ...transport.Hooks) ([2]*transport.Endpoint, [2]netip.AddrPort) {
	t.Helper()
	var ep [2]*transport.Endpoint
	var ad [2]netip.AddrPort
	for i := range 2 {
		var err error
		ep[i], err = transport.NewEndpoint(cfg, rand.New(rand.NewPCG(seed, uint64(i))), hooks...)
		if err != nil {
			t.Fatal(err)
		}
		ad[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 23600)
		n.Attach(ad[i], ep[i], testnet.HostConfig{})
	}
	return ep, ad
}

// forEvents hands every pending event of e to f.
func forEvents(e *transport.Endpoint, f func(transport.Event)) {
	for ev := range transport.Pending(e) {
		f(ev)
	}
}

// receiveAll runs n until e has received want messages, within 10 s of virtual time,
// and reports whether it did.
func receiveAll(n *testnet.Network, e *transport.Endpoint, want int) bool {
	got := 0
	return n.RunUntil(1e10, func() bool {
		for ev := range transport.Pending(e) {
			if ev.Kind == transport.MessageReceived {
				got++
			}
		}
		return got == want
	})
}
