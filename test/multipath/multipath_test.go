package multipath

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/test/results"
	"github.com/smartt-transport/smartt/transport"
)

// ccs are the congestion controllers the comparisons run under: the engine's default
// and the fixed window (the comparisons must not depend on the controller).
func ccs() []string {
	out := []string{transport.DefaultConfig().CC}
	if !slices.Contains(out, "fixed") {
		out = append(out, "fixed")
	}
	return out
}

func run(t *testing.T, s Scenario) Result {
	t.Helper()
	r, err := Run(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func total(r Result) uint64 {
	var n uint64
	for _, p := range r.PathPackets {
		n += p
	}
	return n
}

func slowPath(lb, cc string, trim bool) Scenario {
	s := Default(lb)
	s.CC, s.Trimming = cc, trim
	s.Slow, s.SlowRate = 0, s.PathRate/2
	return s
}

func deadPath(lb, cc string, trim bool) Scenario {
	s := Default(lb)
	s.CC, s.Trimming = cc, trim
	s.Dead, s.FailAt = 2, 500_000
	return s
}

// One path at half rate: REPS learns from the CE marks and sends measurably fewer packets
// down it than OPS, and finishes the 16 MiB transfer sooner.
func TestSlowPathREPSBeatsOPS(t *testing.T) {
	for _, cc := range ccs() {
		for _, trim := range []bool{true, false} {
			name := fmt.Sprintf("cc=%s/trim=%v", cc, trim)
			t.Run(name, func(t *testing.T) {
				rp := run(t, slowPath("reps", cc, trim))
				op := run(t, slowPath("ops", cc, trim))
				if !rp.Done || !op.Done {
					t.Fatalf("transfer incomplete: reps %v ops %v", rp.Done, op.Done)
				}
				rs, os := float64(rp.SlowPackets)/float64(total(rp)), float64(op.SlowPackets)/float64(total(op))
				t.Logf("slow path: reps %d packets (%.1f %%), ops %d (%.1f %%); FCT reps %d us, ops %d us",
					rp.SlowPackets, 100*rs, op.SlowPackets, 100*os, rp.FCT/1000, op.FCT/1000)
				if float64(rp.SlowPackets) > 0.85*float64(op.SlowPackets) || rs >= os {
					t.Errorf("REPS put %d packets (%.1f %%) on the slow path, OPS %d (%.1f %%)",
						rp.SlowPackets, 100*rs, op.SlowPackets, 100*os)
				}
				if float64(rp.FCT) > 0.95*float64(op.FCT) {
					t.Errorf("REPS finished in %d us, OPS in %d us", rp.FCT/1000, op.FCT/1000)
				}
			})
		}
	}
}

// One path drops everything from 500 us on: REPS freezes, sends at least 10x fewer
// packets into the dead path than OPS, and the transfer completes.
func TestDeadPathREPSFreezes(t *testing.T) {
	for _, cc := range ccs() {
		for _, trim := range []bool{true, false} {
			t.Run(fmt.Sprintf("cc=%s/trim=%v", cc, trim), func(t *testing.T) {
				rp := run(t, deadPath("reps", cc, trim))
				op := run(t, deadPath("ops", cc, trim))
				t.Logf("into the dead path after the failure: reps %d, ops %d; reps froze %d times; FCT reps %d us, ops %d us",
					rp.DeadAfterFail, op.DeadAfterFail, rp.FreezeEpisodes, rp.FCT/1000, op.FCT/1000)
				if !rp.Done || !op.Done {
					t.Fatalf("transfer incomplete: reps %v ops %v", rp.Done, op.Done)
				}
				if rp.FreezeEpisodes == 0 {
					t.Error("REPS never entered freezing mode")
				}
				if op.DeadAfterFail < 100 || 10*rp.DeadAfterFail > op.DeadAfterFail {
					t.Errorf("into the dead path: reps %d, ops %d: want at least 10x fewer",
						rp.DeadAfterFail, op.DeadAfterFail)
				}
			})
		}
	}
}

// Without freezing, REPS's core logic alone leaks far more packets into the dead path:
// freezing is what the previous test measures.
func TestDeadPathFreezingMatters(t *testing.T) {
	frozen := run(t, deadPath("reps", "", true))
	s := deadPath("reps", "", true)
	s.Tune = func(c *transport.Config) { c.REPS.NoFreeze = true }
	open := run(t, s)
	t.Logf("into the dead path: with freezing %d, without %d", frozen.DeadAfterFail, open.DeadAfterFail)
	if open.FreezeEpisodes != 0 || 3*frozen.DeadAfterFail > open.DeadAfterFail {
		t.Fatalf("with freezing %d, without %d (episodes %d)", frozen.DeadAfterFail, open.DeadAfterFail, open.FreezeEpisodes)
	}
}

// Coalesced ACKs (one per 4 packets): REPS still keeps off the slow path, and recycling
// every clean EV the ACK reports, not only the trigger's, finishes sooner.
func TestCoalescedAcks(t *testing.T) {
	op := run(t, slowPath("ops", "", true))
	os := float64(op.SlowPackets) / float64(total(op))
	var fct [2]int64
	for i, clean := range []bool{false, true} {
		s := slowPath("reps", "", true)
		s.Tune = func(c *transport.Config) {
			c.Ack.Every, c.Ack.CleanEVs, c.REPS.CleanEVs = 4, clean, clean
		}
		r := run(t, s)
		if !r.Done {
			t.Fatal("incomplete")
		}
		share := float64(r.SlowPackets) / float64(total(r))
		fct[i] = r.FCT
		t.Logf("ack every 4, clean EVs %v: slow-path share %.1f %% (ops %.1f %%), FCT %d us (ops %d us)",
			clean, 100*share, 100*os, r.FCT/1000, op.FCT/1000)
		if share >= os {
			t.Errorf("clean EVs %v: slow-path share %.3f, ops %.3f", clean, share, os)
		}
	}
	if fct[1] >= fct[0] || fct[1] >= op.FCT {
		t.Errorf("FCT: trigger EV only %d us, all clean EVs %d us, ops %d us", fct[0]/1000, fct[1]/1000, op.FCT/1000)
	}
}

// REPS keeps its advantage with an EVS of 32, 256 and 65536 values.
func TestEVSSizes(t *testing.T) {
	for _, evs := range []int{32, 256, 1 << 16} {
		var r [2][2]Result // [reps, ops][slow, dead]
		for i, lb := range []string{"reps", "ops"} {
			for j, sc := range []func(string, string, bool) Scenario{slowPath, deadPath} {
				s := sc(lb, "", true)
				s.EVS = evs
				r[i][j] = run(t, s)
				if !r[i][j].Done {
					t.Fatalf("evs %d %s: incomplete", evs, lb)
				}
			}
		}
		t.Logf("evs %d: slow FCT reps %d us, ops %d us; into the dead path reps %d, ops %d", evs,
			r[0][0].FCT/1000, r[1][0].FCT/1000, r[0][1].DeadAfterFail, r[1][1].DeadAfterFail)
		if r[0][0].FCT >= r[1][0].FCT || r[0][1].FCT >= r[1][1].FCT || 10*r[0][1].DeadAfterFail > r[1][1].DeadAfterFail {
			t.Errorf("evs %d: REPS lost its advantage", evs)
		}
	}
}

func TestDeterministic(t *testing.T) {
	a := run(t, deadPath("reps", "", true))
	b := run(t, deadPath("reps", "", true))
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs differ:\n%+v\n%+v", a, b)
	}
}

// TestResultsTable prints docs/reps.md's tables and fails if the docs show other figures
// (`smartt-lab results` rewrites them):
//
//	go test ./test/multipath -run TestResultsTable -v
func TestResultsTable(t *testing.T) {
	var b strings.Builder
	cc := transport.DefaultConfig().CC
	fmt.Fprintf(&b, "cc = %s; 16 MiB, 4 paths of 25 Gbit/s, 100 Gbit/s NIC\n\n", cc)
	fmt.Fprintf(&b, "| case | trimming | lb | FCT (us) | slow-path share | into dead path after t | freeze episodes | retx (nack/sack/timeout) |\n|---|---|---|---|---|---|---|---|\n")
	fct := func(r Result) string {
		if !r.Done {
			return "not done in 1 s"
		}
		return fmt.Sprint(r.FCT / 1000)
	}
	res := map[caseKey]Result{}
	for _, trim := range []bool{true, false} {
		for _, lb := range []string{"reps", "ops", "ecmp", "plb", "flowlet", "mptcp"} {
			r := run(t, slowPath(lb, cc, trim))
			res[caseKey{"slow", trim, lb}] = r
			fmt.Fprintf(&b, "| slow path (12.5 Gbit/s) | %v | %s | %s | %.1f %% | - | %d | %d/%d/%d |\n", trim, lb, fct(r),
				100*float64(r.SlowPackets)/float64(total(r)), r.FreezeEpisodes, r.Sender.RetxNack, r.Sender.RetxSack, r.Sender.RetxTimeout)
		}
		for _, lb := range []string{"reps", "ops", "ecmp", "plb", "flowlet", "mptcp"} {
			r := run(t, deadPath(lb, cc, trim))
			res[caseKey{"dead", trim, lb}] = r
			fmt.Fprintf(&b, "| dead path from 500 us | %v | %s | %s | - | %d | %d | %d/%d/%d |\n", trim, lb, fct(r),
				r.DeadAfterFail, r.FreezeEpisodes, r.Sender.RetxNack, r.Sender.RetxSack, r.Sender.RetxTimeout)
		}
	}
	results.Check(t, "reps-lb", b.String())
	b.Reset()
	fmt.Fprintf(&b, "| evs | lb | slow path: FCT (us) | slow-path share | dead path: FCT (us) | into dead path after t |\n|---|---|---|---|---|---|\n")
	for _, evs := range []int{32, 256, 1 << 16} {
		for _, lb := range []string{"reps", "ops"} {
			s, d := slowPath(lb, cc, true), deadPath(lb, cc, true)
			s.EVS, d.EVS = evs, evs
			rs, rd := run(t, s), run(t, d)
			fmt.Fprintf(&b, "| %d | %s | %s | %.1f %% | %s | %d |\n", evs, lb, fct(rs),
				100*float64(rs.SlowPackets)/float64(total(rs)), fct(rd), rd.DeadAfterFail)
		}
	}
	results.Check(t, "reps-evs", b.String())
	b.Reset()
	fmt.Fprintf(&b, "| lb | slow path: FCT (us) | slow-path share | dead path: FCT (us) | into dead path after t | freeze episodes |\n|---|---|---|---|---|---|\n")
	for _, lb := range []string{"reps", "ops", "ecmp", "plb", "flowlet", "mptcp"} {
		rs, rd := run(t, withAIMD(slowPath(lb, cc, true))), run(t, withAIMD(deadPath(lb, cc, true)))
		fmt.Fprintf(&b, "| %s | %s | %.1f %% | %s | %d | %d |\n", lb, fct(rs),
			100*float64(rs.SlowPackets)/float64(total(rs)), fct(rd), rd.DeadAfterFail, rd.FreezeEpisodes)
	}
	results.Check(t, "reps-aimd", b.String())
	results.Check(t, "reps-lb-more", moreTable(t, cc))
	results.Check(t, "reps-lb-reading", reading(t, res))
}
