package smartt_test

import (
	"fmt"
	"testing"
)

// jain returns Jain's fairness index of xs: (sum x)^2 / (n sum x^2).
func jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	return s * s / (float64(len(xs)) * s2)
}

// TestLongFlowsFair: eight long flows share the bottleneck. Over the steady state
// (2..12 ms) their throughputs have Jain's index >= 0.95, the link stays busy, and the
// queue stays mostly between Kmin and Kmax.
func TestLongFlowsFair(t *testing.T) {
	for _, fixed := range []bool{false, true} {
		t.Run(fmt.Sprintf("fixed=%v", fixed), func(t *testing.T) {
			r := newRig(t, rigOpts{senders: 8, trim: true, fixed: fixed, record: true, sampleNs: 1000, seed: 3})
			for i := range r.TX {
				r.Send(i, 32<<20)
			}
			const from, to = 2_000_000, 12_000_000
			r.Run(to, nil)
			var tput []float64
			total := 0.0
			for _, f := range r.flows {
				b := float64(f.ackedAt(to) - f.ackedAt(from))
				tput = append(tput, b*8/float64(to-from)) // Gbit/s
				total += b * 8 / float64(to-from)
			}
			j := jain(tput)
			in, below, above, n := 0, 0, 0, 0
			for _, s := range r.Net.Samples(r.RXAddr) {
				if s.Time < from || s.Time >= to {
					continue
				}
				n++
				switch {
				case s.Data < r.Port.KminBytes:
					below++
				case s.Data > r.Port.KmaxBytes:
					above++
				default:
					in++
				}
			}
			s := r.sum()
			t.Logf("throughputs (Gbit/s) %.2f; total %.1f; Jain %.4f; queue in [Kmin,Kmax] %.1f %%, below %.1f %%, above %.1f %% of %d samples; trims %d; FD %d MD %d FI %d MI %d WTD held %d QA %d FastInc %d",
				tput, total, j, 100*float64(in)/float64(n), 100*float64(below)/float64(n), 100*float64(above)/float64(n), n,
				r.Net.PortStats(r.RXAddr).Trims, s.FairDecrease, s.MultDecrease, s.FairIncrease, s.MultIncrease, s.WTDHeld, s.QuickAdapt, s.FastIncrease)
			if j < 0.95 {
				t.Errorf("Jain's index %.4f < 0.95", j)
			}
			if total < 90 {
				t.Errorf("link carried %.1f Gbit/s of payload, want >= 90", total)
			}
			if float64(in) < 0.5*float64(n) {
				t.Errorf("queue between Kmin and Kmax only %.1f %% of the time", 100*float64(in)/float64(n))
			}
		})
	}
}
