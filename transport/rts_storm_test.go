package transport

import (
	"testing"

	"github.com/smartt-transport/smartt/transport/seal"
	"github.com/smartt-transport/smartt/transport/wire"
)

// rtsStorm sends 64 messages of 256 KiB from a to b over a 100 Gbit/s link (a's
// datagrams serialised one after the other) with a 5 us one-way delay, and returns the engine time until the
// last was delivered. With inject, an on-path injector half way returns a copy of every
// data packet to a (FlagTrimmed|FlagReturned, addresses swapped) while the original goes
// on to b.
func rtsStorm(tb testing.TB, auth, inject bool) (int64, Stats) {
	return rtsStormAt(tb, auth, inject, 2500)
}

// rtsStormAt is rtsStorm with the injector's returns taking back ns to reach a.
func rtsStormAt(tb testing.TB, auth, inject bool, back int64) (int64, Stats) {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Trimming, cfg.ReturnToSender = true, true
	if auth {
		cfg.Auth.Mode, cfg.Auth.Key = seal.Auth, seal.Key{7}
	}
	p := newPair(tb, cfg, 5000)
	free := int64(0) // when the link is next free
	p.extra = func(from *Endpoint, b []byte) int64 {
		if from != p.a {
			return 0
		}
		free = max(free, p.now) + int64(len(b))*8/100 // 100 bit/ns
		return free - p.now
	}
	if inject {
		p.drop = func(from *Endpoint, b []byte) bool {
			if from == p.a && wire.Type(b[0]&0x0f) == wire.TypeData && len(b) >= wire.DataHdrLen {
				p.inflight = append(p.inflight, flight{at: p.now + back, to: p.a, from: p.bAddr, data: returnHeader(b)})
			}
			return false
		}
	}
	id, err := p.a.Dial(0, p.bAddr)
	if err != nil {
		tb.Fatal(err)
	}
	const msgs = 64
	msg := make([]byte, 256<<10)
	for i := 0; i < msgs; i++ {
		if _, err := p.a.Send(0, id, msg); err != nil {
			tb.Fatal(err)
		}
	}
	got := 0
	p.runUntil(tb, 1e11, func() bool {
		got += len(eventsOf(p.b, MessageReceived))
		return got == msgs
	})
	return p.now, p.a.Stats()
}

// TestReturnedHeaderStorm: an injector returning a copy of every data packet while the
// originals arrive keeps at least 0.7 of the goodput of the same run without it, with
// and without authentication: the returns it gets acted on prove false and cost the
// connection its trust in returns. (Engine time: the ratio does not depend on the load of
// the machine running it.)
func TestReturnedHeaderStorm(t *testing.T) {
	for _, auth := range []bool{false, true} {
		clean, _ := rtsStorm(t, auth, false)
		storm, s := rtsStorm(t, auth, true)
		ratio := float64(clean) / float64(storm)
		t.Logf("auth %v: %d ns clean, %d ns under the storm: goodput ratio %.3f; returns acted on %d, ignored %d, bad %d, false %d",
			auth, clean, storm, ratio, s.ReturnedRecv, s.ReturnedIgnored, s.ReturnedBad, s.ReturnedFalse)
		if ratio < 0.7 {
			t.Errorf("auth %v: goodput under the returned-header storm is %.3f of the clean run's, want >= 0.7", auth, ratio)
		}
		if s.ReturnedRecv > rtsCredit {
			t.Errorf("auth %v: %d returns acted on, want at most %d", auth, s.ReturnedRecv, rtsCredit)
		}
	}
	// An injector beside the sender: its returns come back before the original's ACK
	// could tell them false, at most rtsCredit unjudged at a time (a dropper's worth).
	clean, _ := rtsStormAt(t, false, false, 0)
	storm, s := rtsStormAt(t, false, true, 0)
	t.Logf("injector beside the sender: goodput ratio %.3f; returns acted on %d, ignored %d, false %d",
		float64(clean)/float64(storm), s.ReturnedRecv, s.ReturnedIgnored, s.ReturnedFalse)
	if float64(clean)/float64(storm) < 0.7 {
		t.Errorf("injector beside the sender: goodput ratio %.3f, want >= 0.7", float64(clean)/float64(storm))
	}
}

// TestReturnedHeadersOffByDefault: without return_to_sender, a genuine returned header
// is counted and ignored; return_to_sender without trimming is refused.
func TestReturnedHeadersOffByDefault(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Trimming = true
	p := newPair(t, cfg, 5000)
	p.drop = func(from *Endpoint, b []byte) bool {
		if from == p.a && wire.Type(b[0]&0x0f) == wire.TypeData {
			p.inflight = append(p.inflight, flight{at: p.now + p.delay/2, to: p.a, from: p.bAddr, data: returnHeader(b)})
		}
		return false
	}
	recoveryRun(t, p, [][]byte{make([]byte, 1<<20)})
	if s := p.a.Stats(); s.ReturnedRecv != 0 || s.ReturnedIgnored == 0 || s.RetxNack != 0 {
		t.Fatalf("return_to_sender off: %d returns acted on, %d ignored, %d resent", s.ReturnedRecv, s.ReturnedIgnored, s.RetxNack)
	}
	cfg.Trimming, cfg.ReturnToSender = false, true
	if err := cfg.Validate(); err == nil {
		t.Fatal("return_to_sender without trimming accepted")
	}
}

// BenchmarkReturnedHeaderStorm: the engine pair's throughput (wall clock) with and without
// the injector of TestReturnedHeaderStorm.
func BenchmarkReturnedHeaderStorm(b *testing.B) {
	for _, c := range []struct {
		name         string
		auth, inject bool
	}{{"clean", false, false}, {"storm", false, true}, {"clean-auth", true, false}, {"storm-auth", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(64 * 256 << 10)
			for i := 0; i < b.N; i++ {
				rtsStorm(b, c.auth, c.inject)
			}
		})
	}
}
