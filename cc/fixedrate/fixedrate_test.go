package fixedrate

import (
	"math"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/internal/ccunit"
)

// TestRate: the rate is the fraction of the line rate, or the coefficient times the
// fair share (line rate / flows); the window is uncapped unless window_bdp is set.
func TestRate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want int64 // bytes/s
		win  int
	}{
		{DefaultConfig(), 12_500_000_000, math.MaxInt32},
		{Config{Fraction: 0.4}, 5_000_000_000, math.MaxInt32},
		{Config{Coefficient: 1, FairShareFlows: 10}, 1_250_000_000, math.MaxInt32},
		{Config{Coefficient: 1.5, FairShareFlows: 10, Fraction: 0.1}, 1_875_000_000, math.MaxInt32}, // coefficient wins
		{Config{Fraction: 1, WindowBDP: 2}, 12_500_000_000, 300_000},
	} {
		p, err := NewParams(tc.cfg, ccunit.Net)
		if err != nil {
			t.Fatal(err)
		}
		f := New(p)
		if f.PacingRate() != tc.want || f.Window() != tc.win {
			t.Errorf("%+v: rate %d B/s, window %d; want %d, %d", tc.cfg, f.PacingRate(), f.Window(), tc.want, tc.win)
		}
	}
}

// TestNoReaction: ECN marks, RTT samples and every kind of loss leave rate and window
// unchanged.
func TestNoReaction(t *testing.T) {
	p, _ := NewParams(Config{Fraction: 0.5}, ccunit.Net)
	f := New(p)
	r, w := f.PacingRate(), f.Window()
	for i := range 1000 {
		f.OnAck(cc.Ack{Now: int64(i) * 300, Bytes: 4096, Packets: 1, RTT: int64(12_000 * (1 + i%20)), CE: true, CECount: 3})
		f.OnLoss(cc.Loss{Now: int64(i) * 300, Bytes: 4096, Cause: cc.LossCause(1 + i%3)})
		if f.PacingRate() != r || f.Window() != w {
			t.Fatalf("after %d marked ACKs and losses: rate %d, window %d", i+1, f.PacingRate(), f.Window())
		}
	}
	if a := testing.AllocsPerRun(100, func() { f.OnAck(cc.Ack{Now: 1, Bytes: 4096, CE: true}) }); a != 0 {
		t.Fatalf("%v allocations per ACK", a)
	}
}

// TestParamsLimits: each parameter at and beyond its range.
func TestParamsLimits(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Fraction: 1}, ""},
		{Config{Fraction: 1.0001}, "fraction"},
		{Config{Fraction: 0}, "fraction"},
		{Config{Fraction: math.NaN()}, "fraction"},
		{Config{Fraction: 8000.0 / 100e9}, ""},
		{Config{Fraction: 7999.0 / 100e9}, "8kbit/s"},
		{Config{Coefficient: 1, FairShareFlows: 1}, ""},
		{Config{Coefficient: 1.01, FairShareFlows: 1}, "link_rate"}, // above line rate
		{Config{Coefficient: 1, FairShareFlows: 0}, "fair_share_flows"},
		{Config{Coefficient: 1, FairShareFlows: 1<<20 + 1}, "fair_share_flows"},
		{Config{Coefficient: -1, FairShareFlows: 4}, "coefficient"},
		{Config{Coefficient: 1001, FairShareFlows: 4}, "coefficient"},
		{Config{Fraction: 1, WindowBDP: 0.1}, ""},
		{Config{Fraction: 1, WindowBDP: 0.09}, "window_bdp"},
		{Config{Fraction: 1, WindowBDP: 1001}, "window_bdp"},
	} {
		_, err := NewParams(tc.cfg, ccunit.Net)
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// BenchmarkOnAck measures one ACK (nothing to do: the floor every controller is
// compared with).
func BenchmarkOnAck(b *testing.B) {
	p, _ := NewParams(DefaultConfig(), ccunit.Net)
	f := New(p)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		f.OnAck(cc.Ack{Now: int64(i) * 330, Bytes: 4096, CE: i%7 == 0})
		_ = f.PacingRate()
	}
}
