package cctest

import (
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/hwprofile"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/wire"
)

// ContractConfig is the configuration Contract builds the named controller with: the
// rig's, with the network features the registration says it needs.
func ContractConfig(name string) transport.Config {
	cfg := Config(true)
	cfg.CC = name
	if r, ok := transport.LookupCC(name); ok && r.Needs.INT {
		cfg.INT = true
	}
	return cfg
}

// Contract checks what every registered congestion controller owes the engine, built as
// an endpoint builds it (transport.NewCC): it reports its hardware cost under its own
// name, with stateBytes bytes of per-connection state (the budget hwprofile checks); it stays allocation-free per ACK and per loss over a stream with
// marks, delay swings, telemetry and every loss cause; and its window and pacing rate
// stay sane (window at least one byte, rate not negative) throughout.
func Contract(t *testing.T, name string, stateBytes int) {
	t.Helper()
	ctl, err := transport.NewCC(name, ContractConfig(name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	co, ok := ctl.(hwprofile.Coster)
	if !ok {
		t.Fatalf("%s: %T reports no hwprofile.Cost", name, ctl)
	}
	if c := co.Cost(); c.Name != name || c.StateBytes != stateBytes {
		t.Errorf("%s: cost %+v, want %d state bytes", name, c, stateBytes)
	}
	hops := make([]wire.INTHop, 3)
	i := int64(0)
	allocs := testing.AllocsPerRun(2000, func() {
		now := 1_000_000 + i*330
		for h := range hops {
			hops[h] = wire.INTHop{TS: uint32(now), TxBytes: uint32(i * 4096), QLen: uint32(i * 97 % 50_000), Rate: 100_000}
		}
		ctl.OnAck(cc.Ack{Now: now, Bytes: 4096, Packets: 1, RTT: 12_000 + i*7919%40_000, CE: i%3 == 0,
			CECount: int(i % 2), EV: uint16(i), InFlight: 100_000, INT: hops})
		if i%16 == 0 {
			ctl.OnLoss(cc.Loss{Now: now, Bytes: 4096, Cause: cc.LossCause(1 + i/16%3), EV: uint16(i), InFlight: 90_000})
		}
		if w, r := ctl.Window(), ctl.PacingRate(); w < 1 || r < 0 {
			t.Fatalf("%s: window %d, pacing rate %d after %d ACKs", name, w, r, i)
		}
		i++
	})
	if allocs != 0 {
		t.Errorf("%s: %.1f allocations per ACK", name, allocs)
	}
}
