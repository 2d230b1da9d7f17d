package bedrun_test

import (
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/bedrun"
)

// TestSoakShort is the soak (smartt-lab testbed soak) compressed to 24 s so CI exercises its
// machinery: 8 hosts on 2 leaves x 4 spines, the three patterns in 6 s epochs with their
// bursts, flaky links, fabric and host link flaps and one daemon restart while messages
// are in flight to it. Every message must be delivered once or reported failed, the
// restarted daemon must be reached by its peers and reach them, and memory must be back
// after the drain (a message the killed daemon was sending is half received somewhere: the
// receiver must free it once the sender has been silent for idle_timeout). About 30 s.
func TestSoakShort(t *testing.T) {
	nm := name(t)
	sc, err := bedrun.ParseSoak([]byte(`
name: soak-short
seed: 21
soak:
  duration: 24s
  drain: 30s
  warmup: 2s
  cooldown: 4s
  epoch: 6s
  patterns: [all_to_all, incast, permutation, all_to_all]
  rate: 4
  incast: {every: 2s, size: 512KiB}
  all_to_all: {every: 2s, size: 96KiB}
  flaky: {every: 6s, links: 2, gap: 100ms, burst: 2ms}
  flaps: {every: 5s, min_down: 300ms, max_down: 1s, host_every: 2, host_max_down: 800ms}
  restart: {at: 0.3, offset: 50ms, down: 2s}
  memory: {interval: 2s}
  progress: 0s
`))
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	t0 := time.Now()
	rep, err := bedrun.Soak(sc, bedrun.SoakOptions{Name: nm, Progress: &log})
	if rep != nil {
		var b strings.Builder
		rep.Write(&b)
		t.Logf("%v\nfaults:\n%s\n%s", time.Since(t0).Round(time.Millisecond), log.String(), b.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Error(v)
	}
	// The machinery did what it was asked to: every kind of traffic, every kind of fault.
	tl := rep.Tally
	for _, k := range []string{"background", "incast bursts", "all-to-all bursts"} {
		if tl.ByKind[k] == 0 {
			t.Errorf("no %s submitted", k)
		}
	}
	if tl.ByClass[0] == 0 || tl.ByClass[2] == 0 {
		t.Errorf("sizes: %v small/medium/large", tl.ByClass)
	}
	if rep.Fabric.FlakyLost == 0 || rep.Fabric.LinkRefused == 0 {
		t.Errorf("faults: %d frames lost on flaky links, %d refused by down links", rep.Fabric.FlakyLost, rep.Fabric.LinkRefused)
	}
	rs := rep.Restart
	if rs == nil || rs.RestartAt == 0 || rs.NewDelivered == 0 || rs.NewSentDelivered == 0 {
		t.Fatalf("restart: %+v", rs)
	}
	if rs.InFlightTo == 0 {
		t.Errorf("no message in flight to h%d when its daemon was killed", rs.Host)
	}
	if d := rep.Daemons[rs.Host]; d.Lives != 2 {
		t.Errorf("h%d's daemon had %d lives", rs.Host, d.Lives)
	}
}
