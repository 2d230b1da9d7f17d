package swift

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/internal/ccunit"
	"math"
	"testing"
)

func params(t testing.TB, mod ...func(*Config)) *Params {
	return ccunit.Params(t, DefaultConfig(), NewParams, mod...)
}

func TestISqrt(t *testing.T) {
	for _, x := range []uint64{0, 1, 2, 3, 4, 15, 16, 17, 65535, 65536, 1 << 40, 1<<40 + 12345, 999_999_999} {
		r := isqrt(x)
		if r*r > x || (r+1)*(r+1) <= x {
			t.Errorf("isqrt(%d) = %d", x, r)
		}
	}
}

// TestTargetGrowsWithHopsShrinksWithCwnd: each hop adds hop_scale; the flow-scaling
// term is fs_range at fs_min_cwnd, 0 from fs_max_cwnd on, and decreasing between.
func TestTargetGrowsWithHopsShrinksWithCwnd(t *testing.T) {
	p := params(t)
	w := New(p)
	w.s.cwnd = 200 * 4096 // above fs_max_cwnd: no flow scaling
	t0 := w.Target()
	if t0 != p.baseTarget {
		t.Fatalf("target %d at a large window, want the base target %d", t0, p.baseTarget)
	}
	w.SetHops(4)
	if got := w.Target() - t0; got != 4*p.hopScale || p.hopScale != 1832 {
		t.Fatalf("4 hops add %d ns, want %d", got, 4*p.hopScale)
	}
	w.SetHops(0)
	prev := int64(0)
	for _, pk := range []float64{100, 50, 10, 1, 0.5, 0.1} {
		w.s.cwnd = uint32(pk * 4096)
		fs := w.Target() - t0
		if fs < prev {
			t.Errorf("flow scaling %d ns at %v packets < %d at a larger window", fs, pk, prev)
		}
		prev = fs
	}
	if math.Abs(float64(prev-p.fsRange)) > 0.01*float64(p.fsRange) {
		t.Fatalf("flow scaling %d at fs_min_cwnd, want fs_range %d", prev, p.fsRange)
	}
}

// TestMDAtMostOncePerRTTAndSized: above the target the first ACK cuts by
// beta x (delay - target)/delay; later ACKs within one RTT do not cut again.
func TestMDAtMostOncePerRTTAndSized(t *testing.T) {
	w := New(params(t))
	w0 := float64(w.Cwnd())
	target := w.Target()
	delay := 2 * target
	w.OnAck(cc.Ack{Now: 1000, Bytes: 4096, Packets: 1, RTT: delay})
	want := w0 * (1 - 0.8*float64(delay-target)/float64(delay))
	if got := float64(w.Cwnd()); math.Abs(got-want) > 2 {
		t.Fatalf("cut to %v, want %.0f", got, want)
	}
	w1 := w.Cwnd()
	for i := range 10 {
		w.OnAck(cc.Ack{Now: 1000 + int64(i)*1000, Bytes: 4096, Packets: 1, RTT: delay})
	}
	if w.Cwnd() != w1 || w.CCStats().Cuts != 1 {
		t.Fatalf("window %d after more ACKs within one RTT (was %d), %d cuts", w.Cwnd(), w1, w.CCStats().Cuts)
	}
	w.OnAck(cc.Ack{Now: 1000 + delay, Bytes: 4096, Packets: 1, RTT: delay})
	if w.CCStats().Cuts != 2 {
		t.Fatal("no second cut one RTT later")
	}
	// A huge delay cuts at most max_mdf.
	w.OnAck(cc.Ack{Now: 1000 + 3*delay, Bytes: 4096, Packets: 1, RTT: 100 * delay})
	w2 := w.Cwnd()
	w.s.lastDec -= uint32(200 * delay)
	w.OnAck(cc.Ack{Now: 1000 + 3*delay, Bytes: 4096, Packets: 1, RTT: 1000 * delay})
	if w.Cwnd() < w2/2-1 {
		t.Fatalf("cut %d -> %d: more than max_mdf", w2, w.Cwnd())
	}
}

// TestAdditiveIncreasePerRTT: below the target, a window of ACKs adds ai packets.
func TestAdditiveIncreasePerRTT(t *testing.T) {
	w := New(params(t, func(c *Config) { c.MaxWindowBDP = 10 }))
	w0 := w.Cwnd()
	for i := range (w0 + 4095) / 4096 {
		w.OnAck(cc.Ack{Now: int64(i), Bytes: 4096, Packets: 1, RTT: 12_000})
	}
	if g := w.Cwnd() - w0; g < 3900 || g > 4300 {
		t.Fatalf("grew %d bytes in one window, want ~4096", g)
	}
}

// TestPacingBelowOnePacket: a window below one MTU is paced at cwnd per RTT while the
// engine's window stays one packet.
func TestPacingBelowOnePacket(t *testing.T) {
	w := New(params(t))
	if w.PacingRate() != 0 {
		t.Fatal("paced at a large window")
	}
	w.s.cwnd, w.s.rtt = 1024, 20_000
	if w.Window() != 4096 || w.PacingRate() != 1024*1_000_000_000/20_000 {
		t.Fatalf("window %d, rate %d", w.Window(), w.PacingRate())
	}
}

// TestTimeoutsResetWindow: the fifth consecutive timeout drops the window to min_cwnd;
// an ACK resets the count.
func TestTimeoutsResetWindow(t *testing.T) {
	p := params(t)
	w := New(p)
	for i := range 5 {
		w.OnLoss(cc.Loss{Now: int64(i) * 1_000_000, Cause: cc.LossTimeout})
	}
	if int64(w.Cwnd()) != p.minCwnd {
		t.Fatalf("window %d after 5 timeouts, want %d", w.Cwnd(), p.minCwnd)
	}
	if w.PacingRate() == 0 {
		t.Fatal("not paced at min_cwnd")
	}
}

// BenchmarkOnAck measures one ACK with RTTs spread over 1..2.7 base RTTs.
func BenchmarkOnAck(b *testing.B) {
	w := New(params(b))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		w.OnAck(cc.Ack{Now: int64(i) * 330, Bytes: 4096, Packets: 1, RTT: 12_000 + int64(i*7919%20_000)})
	}
}
