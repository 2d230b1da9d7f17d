package metrics

import (
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/smartt-transport/smartt/transport/smarttd"
)

// The send-path delay histogram is exported with cumulative buckets in seconds (1 us *
// 4^i) and a count that includes the delays beyond the last bound.
func TestDelayHistogram(t *testing.T) {
	var h smarttd.DelayHist
	for _, ns := range []int64{500, 3000, 3000, 1e9} {
		h.Observe(ns)
	}
	var m dto.Metric
	if err := delayHistogram(&h).Write(&m); err != nil {
		t.Fatal(err)
	}
	hist := m.GetHistogram()
	if hist.GetSampleCount() != 4 || hist.GetSampleSum() != 1.0000065 {
		t.Errorf("count %d sum %v, want 4 and 1.0000065", hist.GetSampleCount(), hist.GetSampleSum())
	}
	b := hist.GetBucket()
	if len(b) != smarttd.DelayBuckets || b[0].GetUpperBound() != 1e-6 || b[0].GetCumulativeCount() != 1 ||
		b[1].GetUpperBound() != 4e-6 || b[1].GetCumulativeCount() != 3 || b[len(b)-1].GetCumulativeCount() != 3 {
		t.Errorf("buckets %v", b)
	}
}
