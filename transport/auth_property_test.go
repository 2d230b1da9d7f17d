package transport_test

import (
	"fmt"
	"testing"

	"github.com/smartt-transport/smartt/test/testnet"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/seal"
)

// TestPropertyExactlyOnceAuth is TestPropertyExactlyOnce with packet authentication on, in
// both modes: under loss up to 30 %, duplication and reordering, every message arrives
// exactly once, byte for byte, and no authentic packet is refused (duplicates the network
// made are refused as replays, which the engine would have dropped as duplicates anyway).
// One run per mode also goes through a trimming bottleneck, whose trimmed packets lose
// their seal and are taken as NACK hints.
func TestPropertyExactlyOnceAuth(t *testing.T) {
	msgs := 300
	if testing.Short() {
		msgs = 100
	}
	key := seal.Key{0x5e, 0xa1}
	for _, mode := range []seal.Mode{seal.Auth, seal.Encrypt} {
		tune := func(c *transport.Config) {
			c.Auth.Mode = mode
			c.Auth.Key = key
		}
		for _, loss := range []float64{0, 0.10, 0.30} {
			seed := uint64(7000) + uint64(loss*100)
			t.Run(fmt.Sprintf("%v/loss=%.0f%%", mode, loss*100), func(t *testing.T) {
				t.Parallel()
				runPropertyWith(t, seed, loss, msgs, seed%2 == 1, propOpts{tune: tune, check: checkAuthClean(false)})
			})
		}
		t.Run(fmt.Sprintf("%v/trimming", mode), func(t *testing.T) {
			t.Parallel()
			host := testnet.HostConfig{NICRate: 100e9,
				Port: testnet.PortConfig{Rate: 25e9, BufferBytes: 64 << 10, Trim: true}}
			runPropertyWith(t, 7777, 0.01, msgs, false, propOpts{tune: tune, host: host, check: checkAuthClean(true)})
		})
	}
}

// checkAuthClean checks that no packet of an honest run was refused for anything but being
// a copy the network duplicated, and (trimming) that trimmed packets served as NACK hints.
func checkAuthClean(trimming bool) func(*testing.T, testnet.Stats, transport.Stats, transport.Stats) {
	return func(t *testing.T, net testnet.Stats, a, b transport.Stats) {
		var replayed uint64
		for side, st := range []transport.Stats{a, b} {
			au := st.Auth
			if au.Failed+au.Unsealed+au.Stale+au.Refused+au.NoKey != 0 {
				t.Errorf("side %d refused honest packets: %+v", side, au)
			}
			if au.Sessions != 1 || au.Rekeys != 1 {
				t.Errorf("side %d: %d receiving sessions, %d started, want 1 and 1", side, au.Sessions, au.Rekeys)
			}
			replayed += au.Replayed
		}
		if replayed == 0 || replayed > net.Duplicated {
			t.Errorf("%d packets refused as replays; the network made %d copies", replayed, net.Duplicated)
		}
		hints := a.Auth.TrimHints + b.Auth.TrimHints
		if trimming && (net.Trimmed == 0 || hints == 0 || a.NacksRecv == 0) {
			t.Errorf("trimming: %d trimmed, %d hints, %d NACKs received", net.Trimmed, hints, a.NacksRecv)
		}
		if !trimming && hints+a.Auth.TrimIgnored+b.Auth.TrimIgnored != 0 {
			t.Errorf("trim hints without trimming: %+v %+v", a.Auth, b.Auth)
		}
		t.Logf("auth: replays refused %d (net copies %d), trimmed %d, hints %d/%d ignored %d/%d",
			replayed, net.Duplicated, net.Trimmed, a.Auth.TrimHints, b.Auth.TrimHints, a.Auth.TrimIgnored, b.Auth.TrimIgnored)
	}
}
