package timing

import (
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/rlcc"
	"github.com/smartt-transport/smartt/config"
)

var net = config.Network{LinkRate: 100e9, BaseRTT: 10_000, MTU: 4096}

// TestTimedRLCC: around rlcc only the ACKs that made a decision are timed, and rlcc's
// decisions fit the cx6dx budget (2 us) by a wide margin even on a loaded host (p50).
func TestTimedRLCC(t *testing.T) {
	p, err := rlcc.NewParams(rlcc.DefaultConfig(), net)
	if err != nil {
		t.Fatal(err)
	}
	c := rlcc.New(p)
	tm := NewTimed(c, 2000)
	now := int64(0)
	for i := range 1000 {
		now += 5_000 // every other ACK carries a packet sent after the last decision
		tm.OnAck(cc.Ack{Now: now, RTT: 10_000 + int64(i%5)*1000})
	}
	if uint32(tm.Hist.Count) != c.Decisions() || c.Decisions() == 0 || c.Decisions() >= 1000 {
		t.Fatalf("timed %d, decisions %d", tm.Hist.Count, c.Decisions())
	}
	if q := tm.Hist.Quantile(0.5); q > 2000 {
		t.Fatalf("p50 decision bound %d ns", q)
	}
	if tm.Cost().Name != "rlcc" {
		t.Fatal("cost not forwarded")
	}
}

// BenchmarkTimedRLCC is one rlcc decision measured by Timed: the measurement's overhead
// is the difference to cc/rlcc's BenchmarkOnAck.
func BenchmarkTimedRLCC(b *testing.B) {
	p, _ := rlcc.NewParams(rlcc.DefaultConfig(), net)
	tm := NewTimed(rlcc.New(p), 2000)
	now := int64(0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now += 40_000
		tm.OnAck(cc.Ack{Now: now, RTT: 10_000 + int64(i&7)*2000})
	}
	b.ReportMetric(float64(tm.Overruns)/float64(tm.Hist.Count), "overrun-fraction")
}
