package nscc

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/internal/ccunit"
	"github.com/smartt-transport/smartt/config"
	"math"
	"testing"
)

// params builds on ccunit.Net, htsim's reference (a = 1), with trimming.
func params(t testing.TB, mod ...func(*Config)) *Params {
	trimmed := func(c Config, n config.Network) (*Params, error) { return NewParams(c, n, true) }
	return ccunit.Params(t, DefaultConfig(), trimmed, mod...)
}

// TestConstantsAsSPEC8: target 0.75 x RTT with trimming and 1 x without; a = 1 on the
// reference network, so fi = 5 MSS, eta = 0.15 MSS, alpha = 4 MSS b / target, maxwnd
// 1.5 BDP, QuickAdapt gate maxwnd/8 and threshold 4 x target.
func TestConstantsAsSPEC8(t *testing.T) {
	p := params(t)
	if p.target != 9000 || p.eta != 614 || p.fiQ16 != 5*4096<<16 || p.maxW != 225_000 ||
		p.qaGate != 225_000/8 || p.qaThresh != 36_000 {
		t.Fatalf("params %+v", *p)
	}
	alpha := 4 * 4096 * (9000.0 / 12000) / 9000
	if math.Abs(float64(p.alphaQ16)/65536-alpha) > 1e-3 {
		t.Fatalf("alpha %v, want %v", float64(p.alphaQ16)/65536, alpha)
	}
	q, _ := NewParams(DefaultConfig(), ccunit.Net, false)
	if q.target != 12_000 {
		t.Fatalf("target without trimming %d", q.target)
	}
}

// ack is one packet's ACK with the given RTT.
func ack(now, rtt int64, ce bool) cc.Ack {
	return cc.Ack{Now: now, Bytes: 4096, Packets: 1, RTT: rtt, CE: ce, InFlight: 100_000}
}

// TestMDOncePerBaseRTT: marked ACKs with a high averaged delay cut by
// max(1 - 0.8 (d - t)/d, 0.5) once per base RTT.
func TestMDOncePerBaseRTT(t *testing.T) {
	n := New(params(t, func(c *Config) { c.DisableQuickAdapt = true }))
	n.s.avgDelay = 18_000 // twice the target
	w0 := float64(n.Window())
	n.OnAck(ack(1000, 12_000+18_000, true))
	d := float64(n.s.avgDelay)
	want := w0 * max(1-0.8*(d-9000)/d, 0.5)
	if got := float64(n.Window()); math.Abs(got-want) > 8 {
		t.Fatalf("cut to %v, want %.0f", got, want)
	}
	for i := range 10 {
		n.OnAck(ack(1000+int64(i)*1000, 30_000, true))
	}
	if n.CCStats().Cuts != 1 {
		t.Fatalf("%d cuts within one base RTT", n.CCStats().Cuts)
	}
	n.OnAck(ack(1000+12_001, 30_000, true))
	if n.CCStats().Cuts != 2 {
		t.Fatalf("%d cuts after one base RTT, want 2", n.CCStats().Cuts)
	}
}

// TestQuickAdaptGate: a delay above 4 x target fires QuickAdapt at the end of the
// period only if the window achieved less than maxwnd/8; the window then becomes the
// achieved bytes and the in-flight bytes' ACKs are ignored.
func TestQuickAdaptGate(t *testing.T) {
	for _, tc := range []struct {
		acks  int // ACKs of 4 KiB in the period
		fires bool
	}{{4, true}, {10, false}} { // gate: 225,000/8 = 28,125 bytes (6.9 packets)
		n := New(params(t))
		n.OnAck(ack(0, 12_000, false)) // opens the first period (ends at 21 us)
		for i := range tc.acks {
			n.OnAck(ack(1000+int64(i), 12_000+50_000, false))
		}
		n.OnAck(ack(22_000, 12_000+50_000, false))
		fired := n.CCStats().QuickAdapts == 1
		if fired != tc.fires {
			t.Fatalf("%d ACKs in the period: QuickAdapt fired %v, want %v", tc.acks, fired, tc.fires)
		}
		if fired {
			if n.Window() != (tc.acks+1)*4096 { // the period's ACKs and the one closing it
				t.Fatalf("window %d after QuickAdapt, want the achieved %d", n.Window(), (tc.acks+1)*4096)
			}
			w := n.Window()
			n.OnAck(ack(23_000, 200_000, true)) // in flight before QuickAdapt: ignored
			if n.Window() != w {
				t.Fatal("an ACK of a packet in flight at QuickAdapt changed the window")
			}
		}
	}
}

// TestLossCutsBytes: a loss outside QuickAdapt removes the lost bytes from the window.
func TestLossCutsBytes(t *testing.T) {
	n := New(params(t, func(c *Config) { c.DisableQuickAdapt = true }))
	w := n.Window()
	n.OnLoss(cc.Loss{Now: 1, Bytes: 4096, Cause: cc.LossTrim})
	if n.Window() != w-4096 {
		t.Fatalf("%d -> %d", w, n.Window())
	}
}

// TestIncreaseQuadrants: below the target without marks the window grows (proportional
// increase), with marks and delay below target it holds.
func TestIncreaseQuadrants(t *testing.T) {
	n := New(params(t, func(c *Config) { c.DisableQuickAdapt = true }))
	n.s.cwnd = 100_000
	for i := range 40 {
		n.OnAck(ack(int64(i)*300, 12_000+2000, false))
	}
	if n.Window() <= 100_000 {
		t.Fatalf("no increase below target: %d", n.Window())
	}
	m := New(params(t, func(c *Config) { c.DisableQuickAdapt = true }))
	m.s.cwnd = 100_000
	for i := range 5 {
		m.OnAck(ack(int64(i)*300, 12_000+2000, true))
	}
	if m.Window() != 100_000 {
		t.Fatalf("marked ACKs below target changed the window: %d", m.Window())
	}
}

// BenchmarkOnAck measures one ACK (RTT 1..3.5 base RTTs, a third marked).
func BenchmarkOnAck(b *testing.B) {
	n := New(params(b))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		n.OnAck(ack(int64(i)*330, 12_000+int64(i*7919%30_000), i%3 == 0))
	}
}
