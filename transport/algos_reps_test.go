package transport

import (
	"slices"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport/wire"
)

func TestBalancersRegisteredAndREPSDefault(t *testing.T) {
	for _, name := range []string{"reps", "ops", "plb", "flowlet", "mptcp", "ecmp"} {
		if !slices.Contains(LBNames(), name) {
			t.Errorf("lb %q not registered (have %v)", name, LBNames())
		}
	}
	cfg := DefaultConfig()
	if cfg.LB != "reps" {
		t.Fatalf("default lb %q", cfg.LB)
	}
	doc := "evs: 65536\nreps:\n  entries: 4\n  freeze_duration: 2ms\n  clean_evs: true\n"
	if err := config.DecodeYAML([]byte(doc), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.REPS.Entries != 4 || cfg.REPS.FreezeDuration != 2_000_000 || !cfg.REPS.CleanEVs ||
		cfg.REPS.Subflows != DefaultConfig().REPS.Subflows {
		t.Fatalf("decoded %+v", cfg.REPS)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.REPS.Entries = 9
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "reps.entries") {
		t.Fatalf("entries 9: %v", err)
	}
}

// Every balancer carries a transfer over the ideal pair; REPS, with a quarter of the EVs
// black-holed from the start, freezes and the snapshot shows it.
func TestBalancersOverPair(t *testing.T) {
	for _, name := range LBNames() {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.LB = name
			p := newPair(t, cfg, 3000)
			var pk wire.Packet
			dropped := 0
			p.drop = func(from *Endpoint, b []byte) bool {
				if from != p.a || pk.Decode(b) != nil || pk.Type != wire.TypeData || pk.EV%4 != 1 {
					return false
				}
				dropped++
				return true
			}
			id, _ := p.a.Dial(0, p.bAddr)
			if _, err := p.a.Send(0, id, make([]byte, 4<<20)); err != nil {
				t.Fatal(err)
			}
			got := false
			p.runUntil(t, 2e9, func() bool {
				for _, ev := range events(p.b) {
					got = got || ev.Kind == MessageReceived
				}
				return got
			})
			info := p.a.Conns(nil)
			if len(info) != 1 {
				t.Fatalf("%d conns", len(info))
			}
			t.Logf("%s: %d data packets dropped, freeze episodes %d", name, dropped, info[0].FreezeEpisodes)
			if name == "reps" && info[0].FreezeEpisodes == 0 {
				t.Fatal("REPS never froze although a quarter of its EVs were black-holed")
			}
		})
	}
}
