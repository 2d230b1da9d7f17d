package reps

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/hwprofile"
	"github.com/smartt-transport/smartt/transport/wire"
)

func TestECMPKeepsOneEVInRange(t *testing.T) {
	seen := map[uint16]bool{}
	for seed := uint64(0); seed < 200; seed++ {
		e := NewECMP(rand.New(rand.NewPCG(seed, 1)), 32)
		ev := e.NextEV(0, 4096, false)
		if ev >= 32 {
			t.Fatalf("EV %d outside an EVS of 32", ev)
		}
		e.OnAck(1, ev, true, 10)
		e.OnLoss(2, ev, 0)
		if e.NextEV(3, 4096, true) != ev {
			t.Fatal("ECMP changed its EV")
		}
		seen[ev] = true
	}
	if len(seen) < 16 {
		t.Fatalf("only %d distinct EVs over 200 connections", len(seen))
	}
	var _ Balancer = &ECMP{}
}

// testEnv: a large EVS, so a random EV is almost never one of the few the tests cache.
var testEnv = Env{EVS: 1 << 16, BDPPackets: 4, BaseRTT: 10_000, Trimming: true}

const t0 = 1_000_000 // ns; tests start here (t = 0 would look like a wrapped clock)

func newTestREPS(t *testing.T, mod func(*Config), env Env) *REPS {
	t.Helper()
	cfg := DefaultConfig()
	cfg.FreezeDuration = 100_000
	if mod != nil {
		mod(&cfg)
	}
	if err := cfg.Validate(env.EVS); err != nil {
		t.Fatal(err)
	}
	return NewREPS(cfg, env, rand.New(rand.NewPCG(7, 7)))
}

// warm makes r leave its initial exploration: it sends the BDP's packets.
func warm(r *REPS, now int64) {
	for range testEnv.BDPPackets {
		r.NextEV(now, 4096, false)
	}
}

func expectEVs(t *testing.T, r *REPS, now int64, want ...uint16) {
	t.Helper()
	for i, w := range want {
		if got := r.NextEV(now, 4096, false); got != w {
			t.Fatalf("pick %d: EV %d, want %d", i, got, w)
		}
	}
}

// expectExplore checks that the next k picks are none of the cached EVs.
func expectExplore(t *testing.T, r *REPS, now int64, k int, cached ...uint16) {
	t.Helper()
	for i := range k {
		got := r.NextEV(now, 4096, false)
		for _, c := range cached {
			if got == c {
				t.Fatalf("pick %d: reused cached EV %d, want a random one", i, got)
			}
		}
	}
}

func TestStatePinnedAt25Bytes(t *testing.T) {
	if s := unsafe.Sizeof(state{}); s != 25 {
		t.Fatalf("packed REPS state is %d bytes, budget 25 (paper Table 1)", s)
	}
	r := newTestREPS(t, nil, testEnv)
	if c := r.Cost(); c.StateBytes != 25 || !c.IntegerOnly || c.Name != "reps" {
		t.Fatalf("cost %+v", c)
	}
	if StateBytes(1) != 11 {
		t.Fatalf("1-entry state %d bytes", StateBytes(1))
	}
}

func TestExploresFirstBDPThenOldestValid(t *testing.T) {
	r := newTestREPS(t, nil, testEnv)
	now := int64(t0)
	expectExplore(t, r, now, 1, 7, 8, 9)
	r.OnAck(now+5_000, 7, false, 5_000)
	r.OnAck(now+5_000, 8, false, 5_000)
	r.OnAck(now+5_000, 9, false, 5_000)
	// Still within the first BDP (4 packets): explore although EVs are cached.
	expectExplore(t, r, now+5_000, 3, 7, 8, 9)
	expectEVs(t, r, now+5_000, 7, 8, 9)
	// Valid bits were cleared on use: nothing valid is left, so explore.
	expectExplore(t, r, now+5_000, 5, 7, 8, 9)
}

func TestBufferOrderAndWrap(t *testing.T) {
	r := newTestREPS(t, nil, testEnv)
	now := int64(t0)
	warm(r, now)
	for ev := uint16(1); ev <= 3; ev++ {
		r.OnAck(now, ev, false, 5_000)
	}
	expectEVs(t, r, now, 1)
	r.OnAck(now, 4, false, 5_000)
	expectEVs(t, r, now, 2, 3, 4)
	// Nine pushes into eight entries: the oldest (11) is overwritten.
	for ev := uint16(11); ev <= 19; ev++ {
		r.OnAck(now, ev, false, 5_000)
	}
	expectEVs(t, r, now, 12, 13, 14, 15, 16, 17, 18, 19)
	expectExplore(t, r, now, 3, 11, 12, 13, 14, 15, 16, 17, 18, 19)

	// A 3-entry buffer wraps at 3.
	r3 := newTestREPS(t, func(c *Config) { c.Entries = 3 }, testEnv)
	warm(r3, now)
	for ev := uint16(21); ev <= 25; ev++ {
		r3.OnAck(now, ev, false, 5_000)
	}
	expectEVs(t, r3, now, 23, 24, 25)
	r3.OnAck(now, 26, false, 5_000)
	r3.OnAck(now, 27, false, 5_000)
	expectEVs(t, r3, now, 26, 27)
	if r3.Cost().StateBytes != 15 {
		t.Fatalf("3-entry state %d bytes", r3.Cost().StateBytes)
	}
}

func TestCEMarkedEVsNeverRecycled(t *testing.T) {
	r := newTestREPS(t, nil, testEnv)
	now := int64(t0)
	warm(r, now)
	r.OnAck(now, 5, true, 5_000)
	r.OnAck(now, 6, false, 5_000)
	r.OnAck(now, 5, true, 5_000)
	expectEVs(t, r, now, 6)
	expectExplore(t, r, now, 50, 5, 6)
	// Not even in freezing mode.
	r.OnLoss(now, 1, cc.LossTimeout)
	for range 20 {
		if ev := r.NextEV(now, 4096, false); ev != 6 {
			t.Fatalf("freezing reused EV %d, only 6 was ever clean", ev)
		}
	}
}

func TestFreezingReusesInvalidAndNeverExplores(t *testing.T) {
	r := newTestREPS(t, nil, testEnv)
	now := int64(t0)
	warm(r, now)
	for _, ev := range []uint16{100, 101, 102} {
		r.OnAck(now, ev, false, 5_000)
	}
	expectEVs(t, r, now, 100) // 100 used: invalid now
	r.OnLoss(now, 999, cc.LossTimeout)
	if !r.Freezing(now) || r.FreezeEpisodes() != 1 {
		t.Fatalf("freezing %v episodes %d", r.Freezing(now), r.FreezeEpisodes())
	}
	// Valid ones first (101, 102), then round robin over all cached, oldest first.
	expectEVs(t, r, now, 101, 102, 100, 101, 102, 100, 101, 102)
	// A fresh clean ACK is valid and goes first, then the round robin resumes.
	r.OnAck(now, 103, false, 5_000)
	got := []uint16{}
	for range 9 {
		got = append(got, r.NextEV(now+1_000, 4096, false))
	}
	if got[0] != 103 {
		t.Fatalf("picks %v: valid 103 not first", got)
	}
	for _, ev := range got {
		if ev < 100 || ev > 103 {
			t.Fatalf("picks %v: explored %d while freezing", got, ev)
		}
	}
	// An idle gap while frozen does not restart exploration either.
	if ev := r.NextEV(now+90_000, 4096, false); ev < 100 || ev > 103 {
		t.Fatalf("explored %d after an idle gap while frozen", ev)
	}
}

func TestFreezingTimedExitAndReentry(t *testing.T) {
	r := newTestREPS(t, nil, testEnv) // FreezeDuration 100us
	now := int64(t0)
	warm(r, now)
	r.OnAck(now, 40, false, 5_000)
	r.OnLoss(now, 1, cc.LossTimeout)
	// A second failure at +30us neither counts as an episode nor prolongs the freeze.
	r.OnLoss(now+30_000, 1, cc.LossSack)
	if r.FreezeEpisodes() != 1 {
		t.Fatal("a loss while frozen counted as a new episode")
	}
	for _, dt := range []int64{1_000, 60_000, 99_000} {
		if !r.Freezing(now + dt) {
			t.Fatalf("not freezing at +%dus", dt/1000)
		}
		if ev := r.NextEV(now+dt, 4096, false); ev != 40 {
			t.Fatalf("+%dus: EV %d while frozen", dt/1000, ev)
		}
	}
	after := now + 101_000
	if r.Freezing(after) {
		t.Fatal("still freezing freeze_duration after it began")
	}
	r.OnAck(after, 41, false, 5_000) // cached after the exit
	// Out of freezing: the buffer of before is forgotten and a BDP is explored.
	expectExplore(t, r, after, 2, 40, 41)
	// Losses continue: re-entered at once, on the EVs cached since the exit.
	r.OnLoss(after+1_000, 2, cc.LossTimeout)
	if !r.Freezing(after+1_000) || r.FreezeEpisodes() != 2 {
		t.Fatalf("no re-entry: freezing %v episodes %d", r.Freezing(after+1_000), r.FreezeEpisodes())
	}
	expectEVs(t, r, after+1_000, 41, 41, 41)
}

// Issue 19 (the REPS paper's Fig. 19): links fail one after another, so every EV a
// frozen connection has cached can lead into a dead link. Its packets are then all
// lost and no ACK brings a live EV; were every loss to prolong the freeze, the
// connection would stay frozen on dead EVs until routing converges. As in the paper
// ("we simply exit freezing mode after a fixed amount of time ... This prevents REPS
// from getting stuck ... if the EVs in the buffer were all pointing to a failing
// path") and htsim, the freeze ends FreezeDuration after it began and the connection
// explores.
func TestFreezeEndsWhenEveryCachedEVIsDead(t *testing.T) {
	dead := []uint16{10, 11, 12}
	for i, extend := range []bool{false, true, false} {
		r := newTestREPS(t, func(c *Config) {
			c.FreezeExtend = extend
			if i == 2 {
				c.FreezeExit = FreezeExitProbe // probes of the first failure's EV are lost too
			}
		}, testEnv) // 100us
		now := int64(t0)
		warm(r, now)
		for _, ev := range dead {
			r.OnAck(now, ev, false, 5_000)
		}
		r.OnLoss(now, 99, cc.LossTimeout) // the first failure
		// Later failures take the cached EVs' links: every packet is lost, 10us on.
		escaped := int64(-1)
		for dt := int64(0); dt < 1_000_000 && escaped < 0; dt += 10_000 {
			ev := r.NextEV(now+dt, 4096, false)
			if !slices.Contains(dead, ev) && ev != 99 { // 99: a probe of the first failure
				escaped = dt
				break
			}
			r.OnLoss(now+dt+10_000, ev, cc.LossSack)
		}
		switch {
		case extend && escaped >= 0:
			t.Fatalf("freeze_extend: left the dead EVs at +%dus", escaped/1000)
		case !extend && (escaped < 0 || escaped > 110_000):
			t.Fatalf("escaped the dead EVs at %d ns (-1: not within 1 ms), want within the freeze duration", escaped)
		}
	}
}

// reps.force_freeze_at freezes at that time without any loss, reuses only cached EVs
// from then on, and never leaves freezing (the REPS paper's Appendix A experiment).
func TestForceFreezeAt(t *testing.T) {
	at := int64(t0 + 50_000)
	r := newTestREPS(t, func(c *Config) { c.ForceFreezeAt = 1_050_000 }, testEnv)
	now := int64(t0)
	warm(r, now)
	r.OnAck(now, 7, false, 5_000)
	r.OnAck(now, 8, false, 5_000)
	expectEVs(t, r, now, 7, 8)
	expectExplore(t, r, now+1_000, 20, 7, 8) // before the time: not frozen, explores
	if r.Freezing(at - 1_000) {
		t.Fatal("freezing before force_freeze_at")
	}
	// From the time on: frozen, one episode, only the cached EVs, far beyond freeze_duration.
	for dt := int64(0); dt <= 2_000_000; dt += 10_000 {
		if ev := r.NextEV(at+dt, 4096, false); ev != 7 && ev != 8 {
			t.Fatalf("+%dus: EV %d while forced frozen", dt/1000, ev)
		}
		if !r.Freezing(at + dt) {
			t.Fatalf("+%dus: left forced freezing", dt/1000)
		}
	}
	if r.FreezeEpisodes() != 1 {
		t.Fatalf("episodes %d, want 1", r.FreezeEpisodes())
	}
	// Off by default: the same sequence without the option explores after the time.
	r = newTestREPS(t, nil, testEnv)
	warm(r, now)
	r.OnAck(now, 7, false, 5_000)
	r.OnAck(now, 8, false, 5_000)
	expectEVs(t, r, now, 7, 8)
	expectExplore(t, r, at, 20, 7, 8)
}

func TestFailureVersusCongestionWithTrimming(t *testing.T) {
	r := newTestREPS(t, nil, testEnv)
	now := int64(t0)
	warm(r, now)
	r.OnAck(now, 1, false, 5_000)
	for range 20 {
		r.OnLoss(now, 2, cc.LossTrim) // trimmed: congestion
	}
	if r.Freezing(now) {
		t.Fatal("trims froze REPS")
	}
	r.OnLoss(now, 2, cc.LossSack) // untrimmed loss: failure
	if !r.Freezing(now) {
		t.Fatal("an untrimmed SACK-gap loss did not freeze")
	}
	r = newTestREPS(t, func(c *Config) { c.TimeoutOnly = true }, testEnv)
	r.OnLoss(now, 2, cc.LossSack)
	if r.Freezing(now) {
		t.Fatal("timeout_only: a SACK-gap loss froze REPS")
	}
	r.OnLoss(now, 2, cc.LossTimeout)
	if !r.Freezing(now) {
		t.Fatal("a timeout did not freeze")
	}
	r = newTestREPS(t, func(c *Config) { c.NoFreeze = true }, testEnv)
	r.OnLoss(now, 2, cc.LossTimeout)
	if r.Freezing(now) {
		t.Fatal("no_freeze: froze")
	}
}

func TestFailureVersusCongestionWithoutTrimming(t *testing.T) {
	env := testEnv
	env.Trimming = false // FailureRTT: 15us (3/2 base RTT), window 80us
	now := int64(t0)
	cases := []struct {
		name   string
		rtts   []int64 // RTT samples before the loss, 1us apart
		gap    int64   // time from the last sample to the loss
		freeze bool
	}{
		{"high RTT before the timeout: congestion", []int64{11_000, 40_000, 12_000}, 20_000, false},
		{"low RTT before the timeout: failure", []int64{11_000, 12_000, 14_000}, 20_000, true},
		{"high RTT, but long before: stale, failure", []int64{40_000}, 400_000, true},
		{"no RTT ever: failure", nil, 0, true},
	}
	for _, c := range cases {
		r := newTestREPS(t, nil, env)
		t1 := now
		for _, rtt := range c.rtts {
			t1 += 1_000
			r.OnAck(t1, 3, false, rtt)
		}
		r.OnLoss(t1+c.gap, 3, cc.LossTimeout)
		if r.Freezing(t1+c.gap) != c.freeze {
			t.Errorf("%s: freezing = %v", c.name, !c.freeze)
		}
	}
	// Trims never happen without trimming, but if reported they are still congestion.
	r := newTestREPS(t, nil, env)
	r.OnLoss(now, 3, cc.LossTrim)
	if r.Freezing(now) {
		t.Error("trim froze REPS")
	}
}

func TestIdleConnectionExploresAgain(t *testing.T) {
	r := newTestREPS(t, nil, testEnv) // RTT window 80us: idle after 160us without ACK
	now := int64(t0)
	warm(r, now)
	for _, ev := range []uint16{50, 51, 52} {
		r.OnAck(now, ev, false, 5_000)
	}
	expectEVs(t, r, now+100_000, 50)
	later := now + 200_000
	expectExplore(t, r, later, testEnv.BDPPackets, 50, 51, 52)
	// Stale entries were invalidated: still exploring after the BDP.
	expectExplore(t, r, later, 5, 50, 51, 52)
}

func TestCoalescedAck(t *testing.T) {
	now := int64(t0)
	for _, use := range []bool{false, true} {
		r := newTestREPS(t, func(c *Config) { c.CleanEVs = use }, testEnv)
		warm(r, now)
		var _ CoalescedAcker = r
		r.OnCoalescedAck(now, 63, false, []uint16{60, 61, 62, 63}, 5_000)
		if use {
			expectEVs(t, r, now, 60, 61, 62, 63)
		} else {
			expectEVs(t, r, now, 63)
		}
		expectExplore(t, r, now, 3, 60, 61, 62, 63)
		// A CE-marked trigger is not in the clean list and never recycled.
		r.OnCoalescedAck(now, 70, true, []uint16{71}, 5_000)
		if use {
			expectEVs(t, r, now, 71)
		}
		expectExplore(t, r, now, 3, 70, 71)
	}
}

func TestEVsStayInEVS(t *testing.T) {
	for _, evs := range []int{32, 256, 1 << 16} {
		env := testEnv
		env.EVS = evs
		bs := []Balancer{newTestREPS(t, nil, env), NewOPS(env, rand.New(rand.NewPCG(1, 1))),
			NewPLB(DefaultConfig(), env, rand.New(rand.NewPCG(1, 1))),
			NewFlowlet(DefaultConfig(), env, rand.New(rand.NewPCG(1, 1))),
			NewMPTCP(DefaultConfig(), env, rand.New(rand.NewPCG(1, 1)))}
		seen := map[uint16]bool{}
		for _, b := range bs {
			now := int64(t0)
			for i := range 2000 {
				now += 3_000
				ev := b.NextEV(now, 4096, false)
				if int(ev) >= evs {
					t.Fatalf("%T: EV %d outside EVS %d", b, ev, evs)
				}
				b.OnAck(now+1_000, ev, i%5 == 0, 5_000)
				if i%300 == 0 {
					b.OnLoss(now, ev, cc.LossTimeout)
				}
				if _, ok := b.(*OPS); ok {
					seen[ev] = true
				}
			}
		}
		if want := min(evs, 1000); len(seen) < want*9/10 {
			t.Errorf("OPS used %d distinct EVs of %d", len(seen), evs)
		}
	}
}

func TestPLBRepathsOnCongestedRoundsAndTimeouts(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PLB.Rounds = 2
	p := NewPLB(cfg, testEnv, rand.New(rand.NewPCG(3, 3))) // round: 10us
	ev := p.NextEV(0, 4096, false)
	now := int64(t0)
	round := func(marks, acks int) {
		for i := range acks {
			p.OnAck(now, ev, i < marks, 5_000)
		}
		now += 10_000
	}
	round(4, 10) // 40 %: not congested
	round(9, 10)
	round(2, 10) // breaks the run
	round(9, 10)
	round(0, 1) // closes the previous round
	if p.NextEV(now, 4096, false) != ev || p.Repaths() != 0 {
		t.Fatal("repathed without two consecutive congested rounds")
	}
	round(5, 10)
	round(6, 10)
	round(0, 1)
	if p.NextEV(now, 4096, false) == ev || p.Repaths() != 1 {
		t.Fatal("no repath after two congested rounds")
	}
	ev = p.NextEV(now, 4096, false)
	p.OnLoss(now, ev, cc.LossSack)
	if p.NextEV(now, 4096, false) != ev {
		t.Fatal("repathed on a SACK loss")
	}
	p.OnLoss(now, ev, cc.LossTimeout)
	if p.NextEV(now, 4096, false) == ev {
		t.Fatal("no repath on a timeout")
	}
}

func TestFlowletNewEVAfterGap(t *testing.T) {
	f := NewFlowlet(DefaultConfig(), testEnv, rand.New(rand.NewPCG(4, 4))) // gap 5us
	now := int64(t0)
	ev := f.NextEV(now, 4096, false)
	for range 100 {
		now += 4_000
		if f.NextEV(now, 4096, false) != ev {
			t.Fatal("new EV within a flowlet")
		}
	}
	changed := 0
	for range 100 {
		now += 6_000
		if e := f.NextEV(now, 4096, false); e != ev {
			changed++
			ev = e
		}
	}
	if changed < 95 {
		t.Fatalf("only %d of 100 gaps started a new EV", changed)
	}
}

func TestMPTCPRoundRobin(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Subflows = 3
	m := NewMPTCP(cfg, testEnv, rand.New(rand.NewPCG(5, 5)))
	first := []uint16{m.NextEV(0, 1, false), m.NextEV(0, 1, false), m.NextEV(0, 1, false)}
	for i := range 30 {
		if ev := m.NextEV(0, 1, false); ev != first[i%3] {
			t.Fatalf("pick %d: %d, want %d", i, ev, first[i%3])
		}
	}
	if m.Cost().StateBytes != 7 {
		t.Fatalf("3 subflows: %d bytes", m.Cost().StateBytes)
	}
}

func TestConfigValidation(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(256); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mod  func(*Config)
		evs  int
		want string
	}{
		{func(c *Config) { c.Entries = 9 }, 256, "reps.entries = 9"},
		{func(c *Config) { c.Entries = 0 }, 256, "reps.entries = 0"},
		{func(c *Config) { c.FreezeDuration = 0 }, 256, "reps.freeze_duration"},
		{func(c *Config) { c.FailureRTT = 5_000_000 }, 256, "reps.failure_rtt"},
		{func(c *Config) { c.RTTWindow = -1 }, 256, "reps.rtt_window"},
		{func(c *Config) { c.PLB.CEPercent = 0 }, 256, "reps.plb.ce_percent"},
		{func(c *Config) { c.PLB.Rounds = 300 }, 256, "reps.plb.rounds"},
		{func(c *Config) { c.Subflows = 65 }, 256, "reps.subflows"},
		{func(c *Config) { c.FlowletGap = -5 }, 256, "reps.flowlet_gap"},
		{func(c *Config) { c.Run = -1 }, 256, "reps.run = -1: must be in 1..64 (1: a new EV per packet) or auto"},
		{func(c *Config) { c.ForceFreezeAt = -1 }, 256, "reps.force_freeze_at"},
		{func(c *Config) { c.ForceFreezeAt = 1_000; c.NoFreeze = true }, 256, "reps.force_freeze_at"},
		{func(c *Config) { c.Run = MaxRun + 1 }, 256, "reps.run = 65"},
	} {
		c := DefaultConfig()
		tc.mod(&c)
		err := c.Validate(tc.evs)
		if err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("want error %q, got %v", tc.want, err)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// Every balancer reports its hardware cost; the sizes are the ones docs/reps.md lists.
func TestCosts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	cfg := DefaultConfig()
	want := map[string]int{"reps": 25, "ops": 0, "ecmp": 2, "plb": 11, "flowlet": 6, "mptcp": 17}
	for _, c := range []hwprofile.Coster{NewREPS(cfg, testEnv, rng), NewOPS(testEnv, rng), NewECMP(rng, 256),
		NewPLB(cfg, testEnv, rng), NewFlowlet(cfg, testEnv, rng), NewMPTCP(cfg, testEnv, rng)} {
		k := c.Cost()
		if w, ok := want[k.Name]; !ok || k.StateBytes != w || !k.IntegerOnly || k.Ops <= 0 {
			t.Errorf("%T: cost %+v, want %d state bytes", c, k, w)
		}
		if _, ok := c.(Balancer); !ok {
			t.Errorf("%T is not a Balancer", c)
		}
	}
}

func TestEnvEVSLimit(t *testing.T) {
	// At the limit the count stands; out of range a balancer falls back to the whole space.
	for _, c := range [][2]int{{1, 1}, {wire.MaxEVS, wire.MaxEVS}, {wire.MaxEVS + 1, wire.MaxEVS}, {0, wire.MaxEVS}, {-5, wire.MaxEVS}} {
		if got := (Env{EVS: c[0]}).evs(); got != c[1] {
			t.Errorf("Env{EVS: %d}.evs() = %d, want %d", c[0], got, c[1])
		}
	}
}
