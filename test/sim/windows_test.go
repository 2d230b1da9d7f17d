package sim

import (
	"testing"
)

// TestWindowTraces: output.sample_windows records the congestion window of the first N
// flows at every sample; in an 8:1 incast under SMaRTT every traced window starts at its
// initial window and is cut below it; the ECN-only controller of the paper's Fig. 2
// (smartt.signals: ecn) traces differently. A count beyond the limit is refused.
func TestWindowTraces(t *testing.T) {
	mk := func(signals string) *Scenario {
		sc := scenario(TopologyConfig{Kind: "fattree2", Hosts: 32, Radix: 8, LinkRate: 100e9, LinkLatency: 1000, SwitchLatency: 500},
			WorkloadConfig{Kind: "incast", Senders: 8, Receiver: 0, Size: 1 << 20})
		sc.Transport.CC = "smartt"
		sc.Transport.SMaRTT.Signals = signals
		sc.Output = OutputConfig{SampleInterval: 1000, SampleWindows: 8}
		return sc
	}
	var first [2]int32
	for i, signals := range []string{"", "ecn"} {
		r := run(t, mk(signals))
		if r.Completed != 8 || len(r.Windows) != 8 {
			t.Fatalf("signals %q: %d flows completed, %d window traces", signals, r.Completed, len(r.Windows))
		}
		for _, w := range r.Windows {
			if len(w.Bytes) != len(w.Times) || len(w.Bytes) < 10 {
				t.Fatalf("signals %q %s: %d samples at %d times", signals, w.Port, len(w.Bytes), len(w.Times))
			}
			lo, hi := w.Bytes[0], w.Bytes[0]
			for _, b := range w.Bytes {
				if b > 0 {
					lo = min(lo, b)
				}
				hi = max(hi, b)
			}
			if hi == 0 || lo >= hi {
				t.Errorf("signals %q %s: window never cut (min %d, max %d)", signals, w.Port, lo, hi)
			}
		}
		first[i] = r.Windows[0].Bytes[len(r.Windows[0].Bytes)/4]
	}
	if first[0] == first[1] {
		t.Errorf("SMaRTT and ECN-only traced the same window a quarter into the run (%d)", first[0])
	}
	sc := mk("")
	sc.Output.SampleWindows = 1025
	if _, err := New(sc); err == nil {
		t.Fatal("sample_windows 1025 accepted")
	}
}
