package sim

import (
	"testing"

	"github.com/smartt-transport/smartt/config"
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

// TestUtilSamples: output.sample_util records each sampled port's send rate per window.
// One 1 MiB ECMP flow crossing an idle 100 Gbit/s 2-tier tree leaves its ToR at line
// rate on one uplink and on none of the others; the windows are sample_util apart; a
// window that is not a multiple of the sample interval is refused, and runs without the
// option keep no series (so their output hashes are unchanged).
func TestUtilSamples(t *testing.T) {
	mk := func(util int64) *Scenario {
		sc := scenario(TopologyConfig{Kind: "fattree2", Hosts: 32, Radix: 8, LinkRate: 100e9, LinkLatency: 1000, SwitchLatency: 500},
			WorkloadConfig{Kind: "flows", Flows: []FlowSpec{{Src: 0, Dst: 31, Size: 1 << 20}}})
		sc.Transport.LB = "ecmp"
		sc.Output = OutputConfig{SampleInterval: 1000, SamplePorts: "up", SampleUtil: config.Duration(util)}
		return sc
	}
	r := run(t, mk(10_000))
	if r.Completed != 1 || len(r.Util) != len(r.Samples) || len(r.Util) != 32 {
		t.Fatalf("%d completed, %d util series for %d sampled ports", r.Completed, len(r.Util), len(r.Samples))
	}
	busy := 0
	for _, u := range r.Util {
		if u.Port[:5] != "tor0-" {
			continue
		}
		peak := int32(0)
		for k, v := range u.Bytes {
			if k > 0 && u.Times[k]-u.Times[k-1] != 10_000 {
				t.Fatalf("%s: windows end at %v", u.Port, u.Times)
			}
			peak = max(peak, v)
		}
		switch {
		case peak == 0:
		case peak >= 95_000 && peak <= 101_000: // Mbit/s; at most one packet beyond the window
			busy++
		default:
			t.Errorf("%s: peak %d Mbit/s, want about 100,000 or 0", u.Port, peak)
		}
	}
	if busy != 1 {
		t.Errorf("%d of tor0's uplinks carried the ECMP flow, want 1", busy)
	}
	if r := run(t, mk(0)); r.Util != nil {
		t.Error("util series without output.sample_util")
	}
	if _, err := New(mk(1_500)); err == nil {
		t.Error("sample_util 1.5us with a 1us interval accepted")
	}
}
