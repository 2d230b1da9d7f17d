package smartt_test

import (
	"fmt"
	"testing"

	"github.com/smartt-transport/smartt/cc/smartt"
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

// longFlowsRun is what TestLongFlowsFair measures over the steady state.
type longFlowsRun struct {
	tput             []float64 // per flow, Gbit/s
	total, jain      float64
	in, below, above int // queue samples between Kmin and Kmax, below, above
	samples          int
	trims            uint64
	sum              smartt.Stats
}

// longFlows runs eight 32 MiB flows on the bottleneck (once per test binary) and
// measures 2..12 ms.
func longFlows(t *testing.T, fixed bool) longFlowsRun {
	return once(fmt.Sprint("longflows", fixed), func() longFlowsRun {
		r := newRig(t, rigOpts{senders: 8, trim: true, fixed: fixed, record: true, sampleNs: 1000, seed: 3})
		for i := range r.TX {
			r.Send(i, 32<<20)
		}
		const from, to = 2_000_000, 12_000_000
		r.Run(to, nil)
		var o longFlowsRun
		for _, f := range r.flows {
			b := float64(f.ackedAt(to) - f.ackedAt(from))
			o.tput = append(o.tput, b*8/float64(to-from)) // Gbit/s
			o.total += b * 8 / float64(to-from)
		}
		o.jain = jain(o.tput)
		for _, s := range r.Net.Samples(r.RXAddr) {
			if s.Time < from || s.Time >= to {
				continue
			}
			o.samples++
			switch {
			case s.Data < r.Port.KminBytes:
				o.below++
			case s.Data > r.Port.KmaxBytes:
				o.above++
			default:
				o.in++
			}
		}
		o.trims, o.sum = uint64(r.Net.PortStats(r.RXAddr).Trims), r.sum()
		return o
	})
}

// TestLongFlowsFair: eight long flows share the bottleneck. Over the steady state
// (2..12 ms) their throughputs have Jain's index >= 0.95, the link stays busy, and the
// queue stays mostly between Kmin and Kmax.
func TestLongFlowsFair(t *testing.T) {
	for _, fixed := range []bool{false, true} {
		t.Run(fmt.Sprintf("fixed=%v", fixed), func(t *testing.T) {
			o := longFlows(t, fixed)
			n, s := float64(o.samples), o.sum
			t.Logf("throughputs (Gbit/s) %.2f; total %.1f; Jain %.4f; queue in [Kmin,Kmax] %.1f %%, below %.1f %%, above %.1f %% of %d samples; trims %d; FD %d MD %d FI %d MI %d WTD held %d QA %d FastInc %d",
				o.tput, o.total, o.jain, 100*float64(o.in)/n, 100*float64(o.below)/n, 100*float64(o.above)/n, o.samples,
				o.trims, s.FairDecrease, s.MultDecrease, s.FairIncrease, s.MultIncrease, s.WTDHeld, s.QuickAdapt, s.FastIncrease)
			if o.jain < 0.95 {
				t.Errorf("Jain's index %.4f < 0.95", o.jain)
			}
			if o.total < 90 {
				t.Errorf("link carried %.1f Gbit/s of payload, want >= 90", o.total)
			}
			if float64(o.in) < 0.5*n {
				t.Errorf("queue between Kmin and Kmax only %.1f %% of the time", 100*float64(o.in)/n)
			}
		})
	}
}
