package cctest

import (
	"sort"
	"testing"

	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/wire"
)

// LongFlowResult is what LongFlows measured over the window in which every flow runs,
// after a settling time: each flow's goodput share, the bottleneck's use and its queue.
type LongFlowResult struct {
	Shares      []float64 // bytes each flow had acknowledged over the window
	Jain        float64   // Jain's index of Shares
	Utilisation float64   // all flows' acknowledged bytes / the payload the link could carry in the window
	QueueMean   float64   // mean data-queue occupancy at the bottleneck, in BDPs
	QueueP99    float64   // its 99th percentile, in BDPs
	Trims       uint64    // trims (or drops) at the bottleneck over the whole run
	Drops       uint64
	Marks       uint64
}

// LongFlows is the long-flow experiment of the controllers' papers: flow 0 runs alone,
// flows 1..n-1 join one after another every stagger ns, each sending a message far
// longer than the run; over the last half of the time all of them overlap it returns
// the shares, the link's use and the queue, sampled every base RTT / 4.
func LongFlows(t *testing.T, name string, flows int, stagger, overlap int64, mod func(*transport.Config)) LongFlowResult {
	t.Helper()
	r, recs := Recorded(t, name, Options{Senders: flows, Trim: true, Seed: 11, SampleNs: BaseRTT() / 4}, mod)
	end := int64(flows-1)*stagger + overlap
	// Enough bytes that no flow finishes: the link rate over the whole run.
	size := int(min(int64(LinkRate/8)*end/1_000_000_000*2, 1<<30))
	for i := range flows {
		if i > 0 {
			r.Run(stagger, nil)
		}
		r.Send(i, size)
	}
	from := r.Net.Now() + overlap/2
	r.Run(overlap, nil)
	to := r.Net.Now()
	res := LongFlowResult{}
	var total float64
	for _, f := range recs {
		b := float64(f.AckedAt(to) - f.AckedAt(from))
		res.Shares = append(res.Shares, b)
		total += b
	}
	res.Jain = Jain(res.Shares)
	// Against the payload the link can carry (headers take their share of it).
	goodput := float64(LinkRate) * float64(MTU) / float64(MTU+wire.DataHdrLen)
	res.Utilisation = total * 8 / (goodput * float64(to-from) / 1e9)
	var q []float64
	for _, s := range r.Net.Samples(r.RXAddr) {
		if s.Time >= from && s.Time <= to {
			q = append(q, float64(s.Data)/float64(BDP()))
		}
	}
	if len(q) > 0 {
		var sum float64
		for _, x := range q {
			sum += x
		}
		sort.Float64s(q)
		res.QueueMean, res.QueueP99 = sum/float64(len(q)), q[len(q)*99/100]
	}
	ps := r.Net.PortStats(r.RXAddr)
	res.Trims, res.Drops, res.Marks = ps.Trims, ps.Drops, ps.Marks
	t.Logf("%s, %d long flows: Jain %.3f, utilisation %.3f, queue mean %.2f / p99 %.2f BDP, trims %d, drops %d, marks %d (shares %.0f)",
		name, flows, res.Jain, res.Utilisation, res.QueueMean, res.QueueP99, res.Trims, res.Drops, res.Marks, res.Shares)
	return res
}
