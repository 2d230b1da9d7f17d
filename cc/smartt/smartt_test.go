package smartt

import (
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/config"
)

// The reference network of the unit tests: 100 Gbit/s, 12 us, 4 KiB MTU, so
// bdp = 150,000 B, gamma = 1, trtt = 18 us, fi = 0.25, mi = 2, fd = 0.8, md = 2,
// window bounds [4096, 187,500], FastIncrease tolerance 12 us / 16 = 750 ns.
var refNet = config.Network{LinkRate: 100e9, BaseRTT: 12_000, MTU: 4096}

const (
	mtu  = 4096.0
	bdp  = 150_000.0
	trtt = 18_000
)

// ctl is what the tests drive: both implementations.
type ctl interface {
	cc.Controller
	Cwnd() float64
	Stats() Stats
}

func newBoth(t *testing.T, cfg Config, net config.Network, trimming bool) []ctl {
	t.Helper()
	p, err := NewParams(cfg, net, trimming)
	if err != nil {
		t.Fatal(err)
	}
	return []ctl{NewFloat(p), NewFixed(p)}
}

// set forces a controller's window and WTD average (white-box, to start a case in a
// given state).
func set(c ctl, cwnd, avg float64) {
	switch c := c.(type) {
	case *Float:
		c.s.cwnd, c.s.avg = cwnd, avg
	case *Fixed:
		c.s.cwnd = uint32(math.Round(cwnd * 256))
		c.s.avg = uint32(math.Round(avg * (1 << 31)))
	}
}

func name(c ctl) string {
	if _, ok := c.(*Fixed); ok {
		return "fixed"
	}
	return "float"
}

// tol is how close each implementation must come to the hand-computed window: the
// float one to rounding, the fixed one to a few Q8 roundings.
func tol(c ctl) float64 {
	if name(c) == "fixed" {
		return 0.05
	}
	return 1e-6
}

func ack(now int64, bytes int, rtt int64, ce bool) cc.Ack {
	return cc.Ack{Now: now, Bytes: bytes, Packets: (bytes + 4095) / 4096, RTT: rtt, CE: ce, InFlight: 40960}
}

// TestQuadrants checks each branch of Algorithm 1 against the equations, evaluated by
// hand below for cwnd = 100,000 B and one 4096 B packet.
func TestQuadrants(t *testing.T) {
	const w = 100_000.0
	cases := []struct {
		name string
		cfg  func(*Config)
		net  config.Network
		trim bool
		cwnd float64
		avg  float64 // WTD average before the ACK
		ack  cc.Ack
		want float64
		stat func(Stats) uint64
	}{
		{name: "FD: CE, rtt <= trtt", cwnd: w, avg: 0.5, ack: ack(0, 4096, 15_000, true),
			// cwnd -= cwnd/bdp * fd * size
			want: w - w/bdp*0.8*4096, stat: func(s Stats) uint64 { return s.FairDecrease }},
		{name: "FD at exactly trtt", cwnd: w, avg: 0.5, ack: ack(0, 4096, trtt, true),
			want: w - w/bdp*0.8*4096, stat: func(s Stats) uint64 { return s.FairDecrease }},
		{name: "MD: CE, rtt > trtt, then FD", cwnd: w, avg: 0.5, ack: ack(0, 4096, 24_000, true),
			// (24-18)/24 * 2 * 4096 = 2048 < 4096; then FD on 97,952
			want: (w - 2048) - (w-2048)/bdp*0.8*4096, stat: func(s Stats) uint64 { return s.MultDecrease }},
		{name: "MD capped at the packet size", cwnd: w, avg: 0.5, ack: ack(0, 4096, 100_000, true),
			// (100-18)/100 * 2 * 4096 = 6717.44 > 4096
			want: (w - 4096) - (w-4096)/bdp*0.8*4096, stat: func(s Stats) uint64 { return s.MultDecrease }},
		{name: "MD doubled without trimming", trim: false, cwnd: w, avg: 0.5, ack: ack(0, 4096, 24_000, true),
			// md = 4: (24-18)/24 * 4 * 4096 = 4096
			want: (w - 4096) - (w-4096)/bdp*0.8*4096, stat: func(s Stats) uint64 { return s.MultDecrease }},
		{name: "FI: no CE, rtt > trtt", cwnd: w, ack: ack(0, 4096, 20_000, false),
			// cwnd += size/cwnd * mtu * fi = 4096/100000*4096*0.25 = 41.94
			want: w + 4096/w*mtu*0.25, stat: func(s Stats) uint64 { return s.FairIncrease }},
		{name: "MI: no CE, rtt <= trtt, then FI", cwnd: w, ack: ack(0, 4096, 13_000, false),
			// (18-13)/13 * 4096/100000 * 4096 * 2 = 129.05; then FI on the new window
			want: func() float64 {
				c := w + 5.0/13*4096/w*mtu*2
				return c + 4096/c*mtu*0.25
			}(), stat: func(s Stats) uint64 { return s.MultIncrease }},
		{name: "MI capped at the packet size", cwnd: w, cfg: func(c *Config) { c.DisableFastIncrease = true },
			ack: ack(0, 4096, 1_000, false),
			// (18-1)/1 * 4096/100000 * 4096 * 2 = 5704 > 4096
			want: (w + 4096) + 4096/(w+4096)*mtu*0.25, stat: func(s Stats) uint64 { return s.MultIncrease }},
		{name: "gamma 4 scales fi", net: config.Network{LinkRate: 400e9, BaseRTT: 12_000, MTU: 4096},
			cwnd: 300_000, ack: ack(0, 4096, 20_000, false),
			// bdp 600,000, gamma 4: fi = 1.0
			want: 300_000 + 4096/300_000.0*mtu*1.0, stat: func(s Stats) uint64 { return s.FairIncrease }},
		{name: "gamma 4 scales mi", net: config.Network{LinkRate: 400e9, BaseRTT: 12_000, MTU: 4096},
			cwnd: 300_000, ack: ack(0, 4096, 13_000, false),
			// mi = 2 * 4 = 8, fi = 1
			want: func() float64 {
				c := 300_000 + 5.0/13*4096/300_000*mtu*8
				return c + 4096/c*mtu*1.0
			}(), stat: func(s Stats) uint64 { return s.MultIncrease }},
		{name: "gamma 4 does not scale fd", net: config.Network{LinkRate: 400e9, BaseRTT: 12_000, MTU: 4096},
			cwnd: 300_000, avg: 0.5, ack: ack(0, 4096, 15_000, true),
			want: 300_000 - 300_000/600_000.0*0.8*4096, stat: func(s Stats) uint64 { return s.FairDecrease }},
		{name: "WTD holds a decrease", cwnd: w, avg: 0, ack: ack(0, 4096, 24_000, true),
			// avg becomes 1/8 < 0.25: no branch applies
			want: w, stat: func(s Stats) uint64 { return s.WTDHeld }},
		{name: "WTD off decreases at once", cwnd: w, cfg: func(c *Config) { c.DisableWTD = true },
			ack: ack(0, 4096, 15_000, true), want: w - w/bdp*0.8*4096, stat: func(s Stats) uint64 { return s.FairDecrease }},
		{name: "clamp at max window", cwnd: 187_400, ack: ack(0, 4096, 20_000, false),
			// 187,400 + 5.6 > 1.25 bdp = 187,500? no: 187,405.6
			want: 187_400 + 4096/187_400.0*mtu*0.25, stat: func(s Stats) uint64 { return s.FairIncrease }},
		{name: "clamped to max window", cwnd: 187_500, ack: ack(0, 4096, 13_000, false),
			want: 187_500, stat: func(s Stats) uint64 { return s.ClampMax }},
		{name: "clamped to min window", cwnd: 4096, avg: 0.5, ack: ack(0, 4096, 24_000, true),
			want: 4096, stat: func(s Stats) uint64 { return s.ClampMin }},
		{name: "no RTT sample: no decision", cwnd: w, ack: ack(0, 4096, 0, false),
			want: w, stat: func(s Stats) uint64 { return 1 - s.MultIncrease - s.FairIncrease }},
	}
	for _, tc := range cases {
		cfg := DefaultConfig()
		if tc.cfg != nil {
			tc.cfg(&cfg)
		}
		net := tc.net
		if net.MTU == 0 {
			net = refNet
		}
		trim := tc.trim || !strings.Contains(tc.name, "without trimming")
		for _, c := range newBoth(t, cfg, net, trim) {
			// The first ACK of a flow only opens its QuickAdapt window; start past it.
			c.OnAck(cc.Ack{Now: 0, Bytes: 0})
			set(c, tc.cwnd, tc.avg)
			c.OnAck(tc.ack)
			if got := c.Cwnd(); math.Abs(got-tc.want) > tol(c) {
				t.Errorf("%s/%s: cwnd = %.4f, want %.4f", tc.name, name(c), got, tc.want)
			}
			if n := tc.stat(c.Stats()); n != 1 {
				t.Errorf("%s/%s: counter = %d, want 1 (%+v)", tc.name, name(c), n, c.Stats())
			}
		}
	}
}

// TestWTDSequence: with alpha = 1/8, the third CE mark in a row lifts the average to
// 1/8 + 7/8*1/8 ... = 0.33 >= 0.25; the first two are held back.
func TestWTDSequence(t *testing.T) {
	for _, c := range newBoth(t, DefaultConfig(), refNet, true) {
		c.OnAck(cc.Ack{})
		set(c, 100_000, 0)
		for i := range 3 {
			c.OnAck(ack(0, 4096, 15_000, true))
			avg := 1 - math.Pow(7.0/8, float64(i+1))
			want := 100_000.0
			if avg >= 0.25 {
				want -= want / bdp * 0.8 * 4096
			}
			if got := c.Cwnd(); math.Abs(got-want) > tol(c) {
				t.Errorf("%s: after %d CE ACKs (avg %.3f) cwnd = %.3f, want %.3f", name(c), i+1, avg, got, want)
			}
		}
		if s := c.Stats(); s.WTDHeld != 2 || s.FairDecrease != 1 {
			t.Errorf("%s: %+v", name(c), s)
		}
	}
}

// TestQuickAdapt follows a flow through a trim: the window is cut by the packet, QuickAdapt
// waits for the end of the target-RTT window, sets cwnd = acked * 0.8, ignores the
// feedback of the bytes then in flight, and fires at most once per target RTT.
func TestQuickAdapt(t *testing.T) {
	for _, c := range newBoth(t, DefaultConfig(), refNet, true) {
		w := 100_000.0
		c.OnAck(ack(0, 0, 0, false)) // opens the window: qa_end = 18 us, acked = 0
		set(c, w, 0)
		// Five packets acknowledged at 1..5 us, RTT at target (FI path: +4096/cwnd*1024 each).
		for i := 1; i <= 5; i++ {
			c.OnAck(ack(int64(i)*1000, 4096, 20_000, false))
			w += 4096 / w * mtu * 0.25
		}
		// A trim at 6 us: cut by the packet, arm; the window is not over, so no adapt yet.
		c.OnLoss(cc.Loss{Now: 6000, Bytes: 4096, Cause: cc.LossTrim, InFlight: 30_000})
		w -= 4096
		if got := c.Cwnd(); math.Abs(got-w) > tol(c) {
			t.Fatalf("%s: after trim cwnd = %.3f, want %.3f", name(c), got, w)
		}
		// At 19 us the window is over: acked = 5 + 1 packets (this ACK included).
		c.OnAck(cc.Ack{Now: 19_000, Bytes: 4096, RTT: 20_000, InFlight: 3 * 4096})
		w = 6 * 4096 * 0.8
		if got := c.Cwnd(); math.Abs(got-w) > tol(c) || c.Stats().QuickAdapt != 1 {
			t.Fatalf("%s: QuickAdapt: cwnd = %.3f, want %.3f; %+v", name(c), got, w, c.Stats())
		}
		// Of the 3 packets in flight, the feedback is ignored until their bytes are
		// accounted for: the first ACK (CE and late) is ignored, a trim meanwhile only
		// cuts, and the ACK of the last byte counts again (Algorithm 1 compares after
		// adding): its CE mark is held back by WTD (average 1/8).
		c.OnAck(cc.Ack{Now: 20_000, Bytes: 4096, RTT: 40_000, CE: true, InFlight: 4096})
		c.OnLoss(cc.Loss{Now: 20_500, Bytes: 4096, Cause: cc.LossTrim, InFlight: 4096})
		w -= 4096
		c.OnAck(cc.Ack{Now: 21_000, Bytes: 4096, RTT: 40_000, CE: true, InFlight: 0})
		if got := c.Cwnd(); math.Abs(got-w) > tol(c) || c.Stats().Ignored != 1 || c.Stats().WTDHeld != 1 {
			t.Fatalf("%s: ignore window: cwnd = %.3f, want %.3f; %+v", name(c), got, w, c.Stats())
		}
		// Feedback counts again; QuickAdapt is armed but its window runs until 37 us.
		c.OnAck(cc.Ack{Now: 30_000, Bytes: 4096, RTT: 20_000, InFlight: 0})
		w += 4096 / w * mtu * 0.25
		if got := c.Cwnd(); math.Abs(got-w) > tol(c) || c.Stats().QuickAdapt != 1 {
			t.Fatalf("%s: before window end: cwnd = %.3f, want %.3f; %+v", name(c), got, w, c.Stats())
		}
		// At 38 us it fires again with the bytes acked since 19 us: 4 packets.
		c.OnAck(cc.Ack{Now: 38_000, Bytes: 4096, RTT: 20_000, InFlight: 0})
		w = 4 * 4096 * 0.8
		if got := c.Cwnd(); math.Abs(got-w) > tol(c) || c.Stats().QuickAdapt != 2 || c.Stats().LossTrim != 2 {
			t.Fatalf("%s: second QuickAdapt: cwnd = %.3f, want %.3f; %+v", name(c), got, w, c.Stats())
		}
	}
}

// TestLossCauses: trims and timeouts always cut; a SACK-gap loss cuts only when the
// network does not trim.
func TestLossCauses(t *testing.T) {
	for _, trim := range []bool{true, false} {
		for _, c := range newBoth(t, DefaultConfig(), refNet, trim) {
			set(c, 100_000, 0)
			c.OnLoss(cc.Loss{Now: 0, Bytes: 4096, Cause: cc.LossSack, InFlight: 1})
			want := 100_000.0
			if !trim {
				want -= 4096
			}
			if got := c.Cwnd(); math.Abs(got-want) > tol(c) {
				t.Errorf("trim=%v %s: SACK loss: cwnd = %.1f, want %.1f", trim, name(c), got, want)
			}
			c.OnLoss(cc.Loss{Now: 0, Bytes: 4096, Cause: cc.LossTimeout, InFlight: 1})
			if got := c.Cwnd(); math.Abs(got-(want-4096)) > tol(c) {
				t.Errorf("trim=%v %s: timeout: cwnd = %.1f, want %.1f", trim, name(c), got, want-4096)
			}
			s := c.Stats()
			if s.LossTimeout != 1 || (trim && (s.LossNotCut != 1 || s.LossSack != 0)) || (!trim && s.LossSack != 1) {
				t.Errorf("trim=%v %s: %+v", trim, name(c), s)
			}
		}
	}
}

// TestFastIncrease: after more than a window of bytes at base RTT without CE, +2 MTUs per
// ACK until an ACK that is marked or late; off, the same ACKs take the MI path.
func TestFastIncrease(t *testing.T) {
	for _, off := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.DisableFastIncrease = off
		for _, c := range newBoth(t, cfg, refNet, true) {
			c.OnAck(cc.Ack{})
			set(c, 4096, 0)
			w := 4096.0
			// 8192 bytes at 12.5 us (within 750 ns of base): count 8192 > cwnd 4096.
			c.OnAck(ack(1000, 8192, 12_500, false))
			if off {
				// MI: min(8192, (18-12.5)/12.5 * 8192/4096*4096*2) = 7208.96, then FI
				w += 5.5 / 12.5 * 8192 / w * mtu * 2
				w += 8192 / w * mtu * 0.25
			} else {
				w += 2 * 4096
			}
			c.OnAck(ack(2000, 4096, 12_000, false))
			if off {
				w += min(4096, 0.5*4096/w*mtu*2)
				w += 4096 / w * mtu * 0.25
			} else {
				w += 2 * 4096 // active: every clean base-RTT ACK adds k MTUs
			}
			// A late ACK ends it: FI path.
			c.OnAck(ack(3000, 4096, 20_000, false))
			w += 4096 / w * mtu * 0.25
			// Clean again: the count restarts, so no FastIncrease yet (4096 < cwnd).
			c.OnAck(ack(4000, 4096, 12_000, false))
			w += min(4096, 0.5*4096/w*mtu*2)
			w += 4096 / w * mtu * 0.25
			if got := c.Cwnd(); math.Abs(got-w) > tol(c) {
				t.Errorf("off=%v %s: cwnd = %.3f, want %.3f", off, name(c), got, w)
			}
			s := c.Stats()
			if (!off && (s.FastIncrease != 1 || s.FastIncreaseAcks != 2)) || (off && s.FastIncreaseAcks != 0) {
				t.Errorf("off=%v %s: %+v", off, name(c), s)
			}
		}
	}
}

// TestReactEvery: with react_every = 4 the first three ACKs change nothing and the
// fourth reacts as one ACK of 4 x 4096 bytes.
func TestReactEvery(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ReactEvery = 4
	for _, c := range newBoth(t, cfg, refNet, true) {
		for range 4 {
			c.OnAck(cc.Ack{}) // opening ACK (one reaction)
		}
		set(c, 100_000, 0)
		for i := range 3 {
			c.OnAck(ack(int64(i), 4096, 20_000, false))
			if got := c.Cwnd(); math.Abs(got-100_000) > tol(c) {
				t.Fatalf("%s: ACK %d changed cwnd to %.2f", name(c), i, got)
			}
		}
		c.OnAck(ack(3, 4096, 20_000, false))
		want := 100_000 + 16384/100_000.0*mtu*0.25
		if got := c.Cwnd(); math.Abs(got-want) > tol(c) || c.Stats().Acks != 2 {
			t.Errorf("%s: cwnd = %.3f, want %.3f; %+v", name(c), got, want, c.Stats())
		}
		// A small window reacts once its worth of bytes is acknowledged: with cwnd =
		// 8192 the second ACK reacts, as one of 8192 bytes (FI: +8192/8192*4096*0.25).
		set(c, 8192, 0)
		c.OnAck(ack(4, 4096, 20_000, false))
		c.OnAck(ack(5, 4096, 20_000, false))
		if got := c.Cwnd(); math.Abs(got-(8192+1024)) > tol(c) || c.Stats().Acks != 3 {
			t.Errorf("%s: small window: cwnd = %.3f, want %.3f; %+v", name(c), got, 8192.0+1024, c.Stats())
		}
	}
}

// TestBaseRTTLearnedAndPerHop: a learned base RTT of 30 us moves the target to 45 us, so
// a 40 us RTT is MI, not FI; per hop count, hop 1's 6 us base RTT makes 10 us FI.
func TestBaseRTTLearnedAndPerHop(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LearnBaseRTT = true
	cfg.DisableFastIncrease = true
	for _, c := range newBoth(t, cfg, refNet, true) {
		c.OnAck(ack(0, 4096, 30_000, false)) // learns 30 us
		set(c, 100_000, 0)
		c.OnAck(ack(1, 4096, 40_000, false))
		w := 100_000 + 5.0/40*4096/100_000*mtu*2 // (45-40)/40
		w += 4096 / w * mtu * 0.25
		if got := c.Cwnd(); math.Abs(got-w) > tol(c) || c.Stats().MultIncrease != 2 {
			t.Errorf("learned %s: cwnd = %.3f, want %.3f; %+v", name(c), got, w, c.Stats())
		}
	}
	cfg = DefaultConfig()
	cfg.BaseRTTPerHop = []config.Duration{0: 4000, 1: 6000, 2: 12_000}
	p, err := NewParams(cfg, refNet, true)
	if err != nil {
		t.Fatal(err)
	}
	f, x := NewFloat(p), NewFixed(p)
	f.SetHops(1)
	x.SetHops(1)
	for _, c := range []ctl{f, x} {
		c.OnAck(cc.Ack{})
		set(c, 100_000, 0)
		c.OnAck(ack(1, 4096, 10_000, false)) // trtt = 9 us
		if s := c.Stats(); s.FairIncrease != 1 {
			t.Errorf("per hop %s: %+v", name(c), s)
		}
	}
}

// TestParams pins the derived constants and the validation messages.
func TestParams(t *testing.T) {
	p, err := NewParams(DefaultConfig(), refNet, false)
	if err != nil {
		t.Fatal(err)
	}
	if p.BDP != 150_000 || p.Gamma != 1 || p.FI != 0.25 || p.MI != 2 || p.MD != 4 || p.FD != 0.8 ||
		p.MinWindow != 4096 || p.MaxWindow != 187_500 || p.InitWin != 150_000 || p.target(12_000) != 18_000 || p.FITol != 750 {
		t.Fatalf("derived %+v", p)
	}
	bad := []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.FI = -1 }, "smartt.fi = -1"},
		{func(c *Config) { c.TargetRatio = 1 }, "smartt.target_ratio"},
		{func(c *Config) { c.MaxWindow = 100 }, "smartt.window bounds"},
		{func(c *Config) { c.ReactEvery = 0 }, "smartt.react_every = 0"},
		{func(c *Config) { c.WTDAlpha = 2 }, "smartt.wtd_alpha = 2"},
		{func(c *Config) { c.TargetRTT = 5000 }, "smartt.target_rtt = 5000"},
		{func(c *Config) { c.BaseRTTPerHop = []config.Duration{10} }, "smartt.base_rtt_per_hop[0]"},
	}
	for _, b := range bad {
		cfg := DefaultConfig()
		b.mod(&cfg)
		if _, err := NewParams(cfg, refNet, true); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("want error %q, got %v", b.want, err)
		}
	}
	// 800 Gbit/s x 200 us: 1.25 BDP = 25 MB exceeds the 16 MiB fixed-point window.
	if _, err := NewParams(DefaultConfig(), config.Network{LinkRate: 800e9, BaseRTT: 200_000, MTU: 4096}, true); err == nil {
		t.Error("window beyond 16 MiB accepted")
	}
}

// TestStateSize pins the packed per-flow state: 32 bytes for the fixed-point
// implementation (the paper's is 19; see docs/smartt.md for the difference).
func TestStateSize(t *testing.T) {
	if n := unsafe.Sizeof(fixedState{}); n != 32 {
		t.Errorf("fixed-point state is %d bytes, want 32", n)
	}
	if n := unsafe.Sizeof(floatState{}); n != 40 {
		t.Errorf("float state is %d bytes, want 40", n)
	}
	p, _ := NewParams(DefaultConfig(), refNet, true)
	if c := NewFixed(p).Cost(); c.StateBytes != 32 || !c.IntegerOnly || c.Name != "smartt-fixed" {
		t.Errorf("fixed cost %+v", c)
	}
	if c := NewFloat(p).Cost(); c.StateBytes != 40 || c.IntegerOnly {
		t.Errorf("float cost %+v", c)
	}
}
