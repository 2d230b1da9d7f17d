package smartt

import (
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/config"
)

// TestSignals: the single-signal controllers of the paper's Fig. 2 react to their one
// signal only: ECN-only cuts half the ACK's bytes per CE mark and ignores the RTT,
// delay-only cuts in proportion to how far the RTT is above the target (18 us here) and
// ignores CE marks; both otherwise take the fair increase. Bad values are refused, and
// so is asking for them on the fixed-point path.
func TestSignals(t *testing.T) {
	const w = 100_000.0
	for _, c := range []struct {
		signals string
		rtt     int64
		ce      bool
		want    float64 // window change
	}{
		{"ecn", 10_000, true, -2048},
		{"ecn", 100_000, true, -2048},
		{"ecn", 100_000, false, +1}, // high delay alone: increase
		{"delay", 100_000, false, -2048 * 82.0 / 100},
		{"delay", 10_000, true, +1}, // a CE mark at low delay: increase
		{"delay", 18_000, false, +1},
	} {
		cfg := DefaultConfig()
		cfg.Signals = c.signals
		p, err := NewParams(cfg, refNet, true)
		if err != nil {
			t.Fatal(err)
		}
		f := NewFloat(p)
		set(f, w, 0)
		f.OnAck(ack(1, 4096, c.rtt, c.ce))
		d := f.Cwnd() - w
		switch {
		case c.want == +1 && !(d > 0 && d < 4096):
			t.Errorf("%s rtt %d ce %v: window changed %.1f, want a fair increase", c.signals, c.rtt, c.ce, d)
		case c.want != +1 && (d > c.want+1 || d < c.want-1):
			t.Errorf("%s rtt %d ce %v: window changed %.1f, want %.1f", c.signals, c.rtt, c.ce, d, c.want)
		}
		if s := f.Stats(); s.QuickAdapt+s.FastIncrease+s.WTDHeld != 0 {
			t.Errorf("%s: SMaRTT's mechanisms ran: %+v", c.signals, s)
		}
	}
	for _, bad := range []struct {
		signals string
		fixed   bool
	}{{"rtt", false}, {"ecn", true}} {
		cfg := DefaultConfig()
		cfg.Signals, cfg.FixedPoint = bad.signals, bad.fixed
		if _, err := NewParams(cfg, config.Network{LinkRate: 100e9, BaseRTT: 12_000, MTU: 4096}, true); err == nil || !strings.Contains(err.Error(), "signals") {
			t.Errorf("signals %q fixed_point %v: err %v, want one naming signals", bad.signals, bad.fixed, err)
		}
	}
}
