package dctcp

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/internal/ccunit"
	"github.com/smartt-transport/smartt/config"
	"math"
	"testing"
)

// params builds on ccunit.Net (a BDP of 150,000 bytes) under the section name "dctcp".
func params(t testing.TB) *Params {
	dctcp := func(c Config, n config.Network) (*Params, error) { return NewParams("dctcp", c, n) }
	return ccunit.Params(t, DefaultConfig(), dctcp)
}

// One packet per ACK; every k-th marked.
func ack(now int64, ce bool) cc.Ack {
	return cc.Ack{Now: now, Bytes: 4096, Packets: 1, RTT: 12_000, CE: ce}
}

// TestAlphaConvergesToMarkingFraction: with a fixed fraction of packets marked, alpha
// converges to that fraction (g = 1/16: within a few tens of windows).
func TestAlphaConvergesToMarkingFraction(t *testing.T) {
	for _, frac := range []int{2, 4, 10} { // one packet in frac marked
		d := New(params(t))
		for i := range 40_000 {
			d.OnAck(ack(int64(i)*330, i%frac == 0))
		}
		want := 1 / float64(frac)
		if math.Abs(d.Alpha()-want) > 0.03 {
			t.Errorf("1 in %d marked: alpha %.3f, want %.3f", frac, d.Alpha(), want)
		}
	}
}

// TestCutIsAlphaHalfOncePerWindow: a window with marks ends with exactly one cut, by
// alpha/2 of the window; ACKs inside the window do not cut.
func TestCutIsAlphaHalfOncePerWindow(t *testing.T) {
	d := New(params(t))
	d.s.alpha = one / 2 // pretend alpha has settled at 0.5
	w0 := d.Window()
	n := (w0 + 4095) / 4096 // packets in the observation window
	cuts := 0
	for i := range n - 1 {
		d.OnAck(ack(int64(i), true))
		if d.Window() < w0 {
			cuts++
		}
	}
	if cuts != 0 || d.CCStats().Cuts != 0 {
		t.Fatalf("the window was cut before its end (%d)", cuts)
	}
	d.OnAck(ack(int64(n), true))
	// all marked: alpha' = 0.5 + (1-0.5)/16
	alpha := 0.5 + 0.5/16
	want := float64(w0) * (1 - alpha/2)
	if got := float64(d.Window()); math.Abs(got-want) > 2 || d.CCStats().Cuts != 1 {
		t.Fatalf("window %v after the marked window's end, want %.0f (alpha %.4f), cuts %d", got, want, d.Alpha(), d.CCStats().Cuts)
	}
}

// TestUnmarkedGrowsOneMTUPerWindow: without marks the window grows by about one MTU per
// window of ACKs, and it never exceeds max_window_bdp.
func TestUnmarkedGrowsOneMTUPerWindow(t *testing.T) {
	d := New(params(t))
	w0 := d.Window()
	for i := range (w0 + 4095) / 4096 {
		d.OnAck(ack(int64(i), false))
	}
	if g := d.Window() - w0; g < 4000 || g > 4200 {
		t.Fatalf("grew %d bytes over one window, want ~4096", g)
	}
	for i := range 1_000_000 {
		d.OnAck(ack(int64(i), false))
	}
	if d.Window() != int(d.p.max) {
		t.Fatalf("window %d, max %d", d.Window(), d.p.max)
	}
}

// TestLossHalvesOncePerWindow: two losses in one window halve it once.
func TestLossHalvesOncePerWindow(t *testing.T) {
	d := New(params(t))
	w0 := d.Window()
	d.OnLoss(cc.Loss{Bytes: 4096, Cause: cc.LossTrim})
	d.OnLoss(cc.Loss{Bytes: 4096, Cause: cc.LossTrim})
	if d.Window() != w0/2 {
		t.Fatalf("window %d after two losses, want %d", d.Window(), w0/2)
	}
}

// TestMPRDMAPerAck: each marked ACK cuts half an MTU, each unmarked one adds MTU^2/cwnd,
// a loss one MTU.
func TestMPRDMAPerAck(t *testing.T) {
	p := params(t)
	m := NewMPRDMA(p)
	w0 := m.Window()
	m.OnAck(ack(0, true))
	if m.Window() != w0-2048 {
		t.Fatalf("marked ACK: %d -> %d, want -2048", w0, m.Window())
	}
	w1 := m.Window()
	m.OnAck(ack(1, false))
	if m.Window() != w1+4096*4096/w1 {
		t.Fatalf("unmarked ACK: %d -> %d, want +%d", w1, m.Window(), 4096*4096/w1)
	}
	w2 := m.Window()
	m.OnLoss(cc.Loss{Bytes: 4096, Cause: cc.LossTrim})
	if m.Window() != w2-4096 {
		t.Fatalf("loss: %d -> %d", w2, m.Window())
	}
	// A coalesced ACK of 4 packets, 2 marked: -1 MTU and +2 MTU^2/cwnd.
	w3 := m.Window()
	m.OnAck(cc.Ack{Bytes: 4 * 4096, Packets: 4, CECount: 2, CE: true})
	if want := w3 + 2*4096*4096/w3 - 4096; m.Window() != want {
		t.Fatalf("coalesced: %d -> %d, want %d", w3, m.Window(), want)
	}
	for range 10_000 {
		m.OnAck(ack(2, true))
	}
	if m.Window() != 4096 {
		t.Fatalf("floor: %d", m.Window())
	}
}

func bench(b *testing.B, c cc.Controller) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		c.OnAck(ack(int64(i)*330, i%3 == 0))
		if i&511 == 511 {
			c.OnLoss(cc.Loss{Bytes: 4096, Cause: cc.LossTrim})
		}
	}
}

// BenchmarkDCTCPOnAck measures one ACK (a third marked, a loss every 512).
func BenchmarkDCTCPOnAck(b *testing.B) { bench(b, New(params(b))) }

// BenchmarkMPRDMAOnAck measures one ACK of MP-RDMA's per-ACK control.
func BenchmarkMPRDMAOnAck(b *testing.B) { bench(b, NewMPRDMA(params(b))) }
