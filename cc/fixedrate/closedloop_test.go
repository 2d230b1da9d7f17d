package fixedrate_test

import (
	"math"
	"testing"

	"github.com/smartt-transport/smartt/cc/cctest"
	"github.com/smartt-transport/smartt/transport"
)

// sentBytes is the payload a sender has put on the wire, retransmissions included.
func sentBytes(st transport.Stats) int64 {
	return int64(st.BytesSent) + int64(st.RetxSack+st.RetxNack+st.RetxTimeout)*cctest.MTU
}

// acked is the payload sender 0 has had acknowledged.
func acked(r *cctest.Rig) int64 {
	ci, _ := r.TX[0].ConnInfo(r.Conn[0])
	return int64(ci.BytesAcked)
}

// TestRateInRig: in the closed-loop rig a sender paced at fraction 0.4 of the line rate
// sends, and has acknowledged, 40 Gbit/s (within 2 %) over the middle of a transfer.
func TestRateInRig(t *testing.T) {
	r := cctest.New(t, cctest.Options{Senders: 1, Trim: true, Seed: 3,
		Mod: func(c *transport.Config) { c.CC, c.FixedRate.Fraction = "fixed_rate", 0.4 }})
	r.Send(0, 16<<20)
	r.Run(200_000, nil)
	t0, s0, a0 := r.Net.Now(), sentBytes(r.TX[0].Stats()), acked(r)
	r.Run(1_000_000, nil)
	dt := float64(r.Net.Now() - t0)
	sent := float64(sentBytes(r.TX[0].Stats())-s0) * 8 / dt // Gbit/s
	got := float64(acked(r)-a0) * 8 / dt
	t.Logf("sent %.2f Gbit/s, acknowledged %.2f Gbit/s (configured 40)", sent, got)
	if math.Abs(sent-40) > 0.8 || math.Abs(got-40) > 0.8 {
		t.Fatalf("sent %.2f, acknowledged %.2f Gbit/s: want 40 +- 2 %%", sent, got)
	}
}

// TestNoReactionInRig: four senders at 1.5 x their fair share (100/4 Gbit/s) overload
// the port: packets are marked and trimmed, and each sender still transmits at
// 37.5 Gbit/s (within 3 %), retransmissions included: congestion does not slow it.
func TestNoReactionInRig(t *testing.T) {
	const n = 4
	r := cctest.New(t, cctest.Options{Senders: n, Trim: true, Seed: 5,
		Mod: func(c *transport.Config) {
			c.CC = "fixed_rate"
			c.FixedRate.Coefficient, c.FixedRate.FairShareFlows = 1.5, n
			c.MaxRetransmits = 255
		}})
	for i := range n {
		r.Send(i, 16<<20)
	}
	r.Run(200_000, nil)
	t0 := r.Net.Now()
	var s0 [n]int64
	for i := range n {
		s0[i] = sentBytes(r.TX[i].Stats())
	}
	r.Run(600_000, nil)
	dt := float64(r.Net.Now() - t0)
	ps := r.Net.PortStats(r.RXAddr)
	if ps.Trims == 0 || ps.Marks == 0 {
		t.Fatalf("no congestion: %d trims, %d marks", ps.Trims, ps.Marks)
	}
	for i := range n {
		rate := float64(sentBytes(r.TX[i].Stats())-s0[i]) * 8 / dt
		t.Logf("sender %d: %.2f Gbit/s under %d trims, %d marks", i, rate, ps.Trims, ps.Marks)
		if math.Abs(rate-37.5) > 37.5*0.03 {
			t.Errorf("sender %d sends %.2f Gbit/s, want 37.5", i, rate)
		}
	}
}
