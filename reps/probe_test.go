package reps

import (
	"testing"

	"github.com/smartt-transport/smartt/cc"
)

// probeMode is REPS with exit by probing, a 100us freeze and the derived probe interval
// (two base RTTs of testEnv: 20us).
func probeMode(c *Config) { c.FreezeExit = FreezeExitProbe }

// frozenOn freezes r at now on a loss of EV failed, with EV 40 cached.
func frozenOn(t *testing.T, r *REPS, now int64, failed uint16) {
	t.Helper()
	warm(r, now)
	r.OnAck(now, 40, false, 5_000)
	r.OnLoss(now, failed, cc.LossTimeout)
	if !r.Freezing(now) {
		t.Fatal("a timeout did not freeze")
	}
}

// With exit by probing, the failed EV is sent once per probe interval while frozen, and
// an ACK of a packet sent on it no earlier than the probe ends the freeze at once (the
// timer alone would hold it until +100us); an ACK of an older packet on it does not.
func TestFreezeExitByProbe(t *testing.T) {
	r := newTestREPS(t, probeMode, testEnv)
	now := int64(t0)
	frozenOn(t, r, now, 7)
	expectEVs(t, r, now+5_000, 40, 40) // no probe before the interval
	if ev := r.NextEV(now+20_000, 4096, true); ev != 40 {
		t.Fatalf("+20us: retransmission on EV %d, want the cached 40 (never a probe)", ev)
	}
	if ev := r.NextEV(now+20_000, 4096, false); ev != 7 {
		t.Fatalf("+20us: EV %d, want the probe on the failed EV 7", ev)
	}
	expectEVs(t, r, now+21_000, 40, 40)   // one probe per interval
	r.OnAck(now+25_000, 7, false, 10_000) // sent at +15us, before the probe
	if !r.Freezing(now + 25_000) {
		t.Fatal("an ACK of a packet sent before the probe ended the freeze")
	}
	r.OnAck(now+30_000, 7, true, 10_000) // the probe's own ACK (CE: congested, alive)
	if r.Freezing(now + 30_000) {
		t.Fatal("still freezing after the probe came back")
	}
	expectExplore(t, r, now+30_000, 4, 40, 7)
	if r.FreezeEpisodes() != 1 {
		t.Fatalf("episodes %d", r.FreezeEpisodes())
	}
}

// The timer rule (the default) sends no probes: the failed EV never comes back while
// frozen, and only the timer ends the freeze.
func TestFreezeExitTimerSendsNoProbe(t *testing.T) {
	r := newTestREPS(t, nil, testEnv)
	now := int64(t0)
	frozenOn(t, r, now, 7)
	for dt := int64(0); dt < 100_000; dt += 5_000 {
		if ev := r.NextEV(now+dt, 4096, false); ev != 40 {
			t.Fatalf("+%dus: EV %d while frozen, want the cached 40", dt/1000, ev)
		}
	}
	r.OnAck(now+60_000, 7, false, 10_000)
	if !r.Freezing(now + 60_000) {
		t.Fatal("timer exit: an ACK on the failed EV ended the freeze")
	}
}

// Lost probes do not prolong a freeze: it still ends FreezeDuration after it began, so a
// connection whose cached EVs failed one after another escapes by exploring (with
// probes that kept the freeze while they failed, Fig. 7's back-to-back failures held
// connections frozen on dead EVs: 200x the ideal completion). A trimmed probe, which
// may have been trimmed before the failure, ends nothing either.
func TestProbeLossDoesNotProlong(t *testing.T) {
	r := newTestREPS(t, probeMode, testEnv)
	now := int64(t0)
	frozenOn(t, r, now, 7)
	for dt := int64(20_000); dt <= 80_000; dt += 20_000 {
		if ev := r.NextEV(now+dt, 4096, false); ev != 7 {
			t.Fatalf("+%dus: EV %d, want a probe", dt/1000, ev)
		}
		cause := cc.LossSack
		if dt == 80_000 {
			cause = cc.LossTrim
		}
		r.OnLoss(now+dt+15_000, 7, cause)
		if !r.Freezing(now + dt + 15_000) {
			t.Fatalf("a lost probe (%v) ended the freeze", cause)
		}
	}
	if r.Freezing(now + 101_000) {
		t.Fatal("lost probes prolonged the freeze beyond its duration")
	}
	if r.FreezeEpisodes() != 1 {
		t.Fatalf("episodes %d", r.FreezeEpisodes())
	}
}

// A forced freeze (force_freeze_at) has no failed EV: probing sends nothing and no ACK
// ends it. Probing costs 6 bytes beside the packed state.
func TestProbeForcedFreezeAndCost(t *testing.T) {
	r := newTestREPS(t, func(c *Config) { probeMode(c); c.ForceFreezeAt = t0 }, testEnv)
	now := int64(t0)
	r.OnAck(now, 40, false, 5_000)
	for dt := int64(0); dt < 300_000; dt += 10_000 {
		if ev := r.NextEV(now+dt, 4096, false); ev != 40 {
			t.Fatalf("+%dus: EV %d under a forced freeze", dt/1000, ev)
		}
		r.OnAck(now+dt+1_000, 40, false, 1_000)
	}
	if !r.Freezing(now + 300_000) {
		t.Fatal("a forced freeze ended")
	}
	if c, d := r.Cost(), newTestREPS(t, nil, testEnv).Cost(); c.StateBytes != d.StateBytes+6 {
		t.Fatalf("probe cost %d bytes, timer %d: want 6 more", c.StateBytes, d.StateBytes)
	}
}

func TestProbeConfigLimits(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*Config)
		want string // "": valid
	}{
		{func(c *Config) { c.FreezeExit = FreezeExitTimer }, ""},
		{func(c *Config) { c.FreezeExit = FreezeExitProbe }, ""},
		{func(c *Config) { c.FreezeExit = "poll" }, `reps.freeze_exit = "poll"`},
		{func(c *Config) { c.FreezeExit = FreezeExitProbe; c.NoFreeze = true }, "reps.freeze_exit"},
		{func(c *Config) { c.ProbeInterval = 1_000 }, ""},
		{func(c *Config) { c.ProbeInterval = 999 }, "reps.probe_interval"},
		{func(c *Config) { c.ProbeInterval = maxSpan }, ""},
		{func(c *Config) { c.ProbeInterval = maxSpan + 1 }, "reps.probe_interval"},
		{func(c *Config) { c.ProbeInterval = -1 }, "reps.probe_interval"},
	} {
		c := DefaultConfig()
		tc.mod(&c)
		err := c.Validate(256)
		if (err == nil) != (tc.want == "") || (err != nil && !contains(err.Error(), tc.want)) {
			t.Errorf("want %q, got %v", tc.want, err)
		}
	}
}
