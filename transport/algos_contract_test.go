package transport

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/hwprofile"
	"github.com/smartt-transport/smartt/reps"
)

// TestEveryControllerOverPair runs every registered congestion controller through the
// engine over the in-memory pair, with one data packet in 40 dropped and one in 3
// arriving CE-marked: every message arrives exactly once and intact.
func TestEveryControllerOverPair(t *testing.T) {
	for _, name := range CCNames() {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.CC = name
			r, _ := LookupCC(name)
			if r.Needs.Trimming {
				cfg.Trimming = true
			}
			if r.Needs.INT {
				cfg.INT = true // the pair stamps nothing: every ACK echoes an empty INT block
			}
			p := newPair(t, cfg, 3000)
			n := dropData(p, 40, 7)
			m := 0
			p.ecn = func(from *Endpoint, b []byte) uint8 {
				if from != p.a {
					return 0
				}
				m++
				if m%3 == 0 {
					return 3 // CE
				}
				return 2 // ECT(0)
			}
			id, err := p.a.Dial(0, p.bAddr)
			if err != nil {
				t.Fatal(err)
			}
			const msgs = 6
			var want [][]byte
			for i := range msgs {
				b := bytes.Repeat([]byte{byte(i + 1)}, 300_000+i*50_000)
				want = append(want, b)
				if _, err := p.a.Send(0, id, b); err != nil {
					t.Fatal(err)
				}
			}
			var got [][]byte
			p.runUntil(t, 5e9, func() bool {
				for _, ev := range events(p.b) {
					if ev.Kind == MessageReceived {
						got = append(got, ev.Data)
					}
					if ev.Kind == MessageFailed {
						t.Fatalf("message failed: %v", ev.Err)
					}
				}
				return len(got) >= msgs
			})
			for range 200 { // a duplicate would arrive within a few more steps
				if !p.step() {
					break
				}
				for _, ev := range events(p.b) {
					if ev.Kind == MessageReceived {
						got = append(got, ev.Data)
					}
				}
			}
			if len(got) != msgs {
				t.Fatalf("%d messages received, want %d exactly once", len(got), msgs)
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("message %d corrupted or out of order", i)
				}
			}
			if *n < 100 || m < 100 {
				t.Fatalf("only %d data packets, %d marked", *n, m)
			}
			t.Logf("%s: %d data packets, %d dropped, %d CE", name, *n, *n/40, m/3)
		})
	}
}

// TestRegistriesRefuseDuplicatesAndMissingFields pins registerCC's and registerLB's
// panics: the two registries share one shape.
func TestRegistriesRefuseDuplicatesAndMissingFields(t *testing.T) {
	fixed, _ := LookupCC("fixed")
	ecmp, _ := LookupLB("ecmp")
	for _, tc := range []struct {
		name string
		reg  func()
		want string
	}{
		{"cc duplicate", func() { registerCC(fixed) }, "registered twice"},
		{"cc no prepare", func() { registerCC(CCRegistration{Name: "x-test"}) }, "no Prepare"},
		{"cc no name", func() { registerCC(CCRegistration{Prepare: fixed.Prepare}) }, "empty name"},
		{"lb duplicate", func() { registerLB(ecmp) }, "registered twice"},
		{"lb no prepare", func() { registerLB(LBRegistration{Name: "x-test"}) }, "no Prepare"},
		{"lb no name", func() { registerLB(LBRegistration{Prepare: ecmp.Prepare}) }, "empty name"},
	} {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, tc.want) {
					t.Errorf("%s: panic %v, want %q", tc.name, r, tc.want)
				}
			}()
			tc.reg()
		}()
	}
	if _, ok := LookupCC("x-test"); ok {
		t.Fatal("a refused controller was kept")
	}
	if _, ok := LookupLB("x-test"); ok {
		t.Fatal("a refused balancer was kept")
	}
}

// reporting is a fixed window that reports counters (cc.StatsReporter).
type reporting struct{ cc.Fixed }

func (r *reporting) CCStats() cc.Stats { return cc.Stats{QuickAdapts: 7, Cuts: 3} }

// wrapping hides a controller behind a wrapper that exposes it (the daemon's timer).
type wrapping struct{ cc.Controller }

func (w wrapping) Unwrap() cc.Controller { return w.Controller }

// TestStatsReporterFoundOncePerConnection: the snapshot reads a controller's counters
// through cc.StatsReporter, also behind a wrapper.
func TestStatsReporterFoundOncePerConnection(t *testing.T) {
	cfg := DefaultConfig()
	p := newPair(t, cfg, 3000, Hooks{NewCC: func() cc.Controller { return wrapping{&reporting{cc.Fixed{Bytes: 1 << 20}}} }})
	id, err := p.a.Dial(0, p.bAddr)
	if err != nil {
		t.Fatal(err)
	}
	ci, ok := p.a.ConnInfo(id)
	if !ok || ci.QuickAdapts != 7 || ci.CCCuts != 3 {
		t.Fatalf("QuickAdapts %d, CCCuts %d (%v), want 7 and 3", ci.QuickAdapts, ci.CCCuts, ok)
	}
}

// TestEveryBalancerHonoursContract checks what every registered load balancer owes the
// engine, built as an endpoint builds it: its cost under its own name, integer-only; EVs
// within [0, EVS) at the smallest and largest EVS; the same EVs from the same seed and
// feedback (determinism); and no allocation per packet, ACK or loss.
func TestEveryBalancerHonoursContract(t *testing.T) {
	for _, name := range LBNames() {
		t.Run(name, func(t *testing.T) {
			for _, evs := range []int{1, 65536} {
				cfg := DefaultConfig()
				cfg.LB, cfg.EVS = name, evs
				r, _ := LookupLB(name)
				mk, err := r.Prepare(&cfg)
				if err != nil {
					t.Fatalf("evs %d: %v", evs, err)
				}
				a, b := mk(rand.New(rand.NewPCG(1, 2))), mk(rand.New(rand.NewPCG(1, 2)))
				co, ok := a.(hwprofile.Coster)
				if !ok || co.Cost().Name != name || !co.Cost().IntegerOnly {
					t.Fatalf("cost of %T: %v", a, ok)
				}
				i := int64(0)
				step := func(bal reps.Balancer) uint16 {
					now := 1_000_000 + i*3_000
					ev := bal.NextEV(now, 4096, i%50 == 0)
					bal.OnAck(now+1_000, ev, i%5 == 0, 12_000)
					if i%300 == 0 {
						bal.OnLoss(now, ev, cc.LossCause(1+i/300%3))
					}
					return ev
				}
				allocs := testing.AllocsPerRun(2000, func() {
					ea, eb := step(a), step(b)
					if int(ea) >= evs || ea != eb {
						t.Fatalf("evs %d, step %d: EVs %d and %d from one seed", evs, i, ea, eb)
					}
					i++
				})
				if allocs != 0 {
					t.Errorf("evs %d: %.1f allocations per packet", evs, allocs)
				}
			}
		})
	}
}
