package timing

import (
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/hwprofile"
)

// spin is a controller whose decisions take at least ns of wall time and count themselves.
type spin struct {
	cc.Fixed
	ns   int64
	n    uint32
	acks []cc.Ack
	lost []cc.Loss
}

func (s *spin) OnAck(a cc.Ack) {
	s.acks = append(s.acks, a)
	if a.RTT == 0 {
		return // not a decision
	}
	for t := nanotime(); nanotime()-t < s.ns; {
	}
	s.n++
}
func (s *spin) OnLoss(l cc.Loss)  { s.lost = append(s.lost, l) }
func (s *spin) Decisions() uint32 { return s.n }
func (s *spin) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "spin", StateBytes: 8, IntegerOnly: true}
}

func TestTimedCountsDecisionsAndOverruns(t *testing.T) {
	inner := &spin{ns: 20_000, Fixed: cc.Fixed{Bytes: 1000}}
	tm := NewTimed(inner, 5_000)
	for i := range 10 {
		tm.OnAck(cc.Ack{Now: int64(i), RTT: 1}) // decisions, 20 us each
		tm.OnAck(cc.Ack{Now: int64(i)})         // skipped feedback: not recorded
	}
	if tm.Hist.Count != 10 || tm.Overruns != 10 {
		t.Fatalf("count %d overruns %d", tm.Hist.Count, tm.Overruns)
	}
	if tm.Hist.Max < 20_000 || tm.Hist.Quantile(0.5) < 16_384 {
		t.Fatalf("max %d p50 %d", tm.Hist.Max, tm.Hist.Quantile(0.5))
	}
	inner.ns = 0
	tm2 := NewTimed(inner, 1_000_000)
	tm2.OnAck(cc.Ack{RTT: 1})
	if tm2.Overruns != 0 || tm2.Hist.Count != 1 {
		t.Fatalf("fast decision: %+v", tm2.Hist)
	}
	if tm.Window() != 1000 || tm.Cost().Name != "spin" {
		t.Fatal("wrapper does not forward")
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	for i := range 100 {
		h.Add(int64(i * 10)) // 0..990
	}
	if h.Count != 100 || h.Max != 990 || h.Mean() != 495 {
		t.Fatalf("%+v", h)
	}
	if q := h.Quantile(0.5); q < 495 || q > 1024 {
		t.Fatalf("p50 bound %d", q)
	}
	if q := h.Quantile(0.99); q != 990 {
		t.Fatalf("p99 bound %d", q)
	}
}

func TestDelayedAppliesFeedbackLater(t *testing.T) {
	inner := &spin{Fixed: cc.Fixed{Bytes: 1}}
	d := NewDelayed(inner, 10_000, 4)
	d.OnAck(cc.Ack{Now: 0, Bytes: 1})
	d.OnLoss(cc.Loss{Now: 3_000, Bytes: 2})
	d.OnAck(cc.Ack{Now: 9_999, Bytes: 3})
	if len(inner.acks)+len(inner.lost) != 0 {
		t.Fatal("feedback applied before its latency")
	}
	d.OnAck(cc.Ack{Now: 13_500, Bytes: 4}) // the first two are due
	if len(inner.acks) != 1 || inner.acks[0].Bytes != 1 || inner.acks[0].Now != 13_500 ||
		len(inner.lost) != 1 || inner.lost[0].Bytes != 2 {
		t.Fatalf("acks %+v lost %+v", inner.acks, inner.lost)
	}
	d.Flush(100_000)
	if len(inner.acks) != 3 || inner.acks[1].Bytes != 3 || inner.acks[2].Bytes != 4 || d.Pending() != 0 {
		t.Fatalf("acks %+v", inner.acks)
	}
	// A full queue drops the oldest and counts it.
	for i := range 6 {
		d.OnAck(cc.Ack{Now: 200_000, Bytes: 10 + i})
	}
	if d.Dropped != 2 || d.Pending() != 4 {
		t.Fatalf("dropped %d pending %d", d.Dropped, d.Pending())
	}
	d.Flush(300_000)
	if inner.acks[3].Bytes != 12 {
		t.Fatalf("oldest survivor %d", inner.acks[3].Bytes)
	}
	// Zero latency passes through.
	z := NewDelayed(inner, 0, 0)
	z.OnAck(cc.Ack{Now: 1, Bytes: 99})
	if inner.acks[len(inner.acks)-1].Bytes != 99 {
		t.Fatal("zero latency delayed")
	}
}

func BenchmarkNanotime(b *testing.B) {
	var s int64
	for b.Loop() {
		s += nanotime()
	}
	_ = s
}
