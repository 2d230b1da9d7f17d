package train

import (
	"fmt"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/sim"
)

// Tree is a two-level leaf-spine fabric, every leaf linked once to every spine.
type Tree struct{ Hosts, Leaves, Spines int }

// PaperTree is the paper's 64-host cluster (Sec. VI-A): four ToRs of 16 hosts and two
// spines, each spine linked to each ToR (our reading of "two spines connected via four
// 100 Gbps links to four ToRs"), so 8:1 oversubscribed at the ToR.
var PaperTree = Tree{Hosts: 64, Leaves: 4, Spines: 2}

// FabricStats is one run on a tree.
type FabricStats struct {
	Flows       int
	Goodput     float64 // payload acknowledged in the window / (sending hosts' line rate)
	RTTus       float64 // mean RTT sample in the window, us (the paper's "latency")
	Losses      uint64  // packets judged lost in the window
	AllLosses   uint64  // over the whole run, bring-up included
	Trims       uint64
	WallSeconds float64
}

// RunTree runs a steady-state test on tree t: "many-to-one" (n senders, chosen by the
// seed, into host 0) or "all-to-all" (every host sends to the next n/Hosts hosts at
// once, so n flows; the simulator keeps one connection per host pair, so n is a
// multiple of Hosts up to Hosts*(Hosts-1)). Flows are long; the window [warm,
// warm+measure) is measured.
func (e Env) RunTree(pol Policy, t Tree, kind string, n int, seed uint64, warm, measure int64) (FabricStats, error) {
	return e.runTree(pol, t, kind, n, seed, warm, measure, nil)
}

// RunTreeSeries is RunTree that also totals every flow's acknowledged bytes, RTT samples
// and losses per bin ns of simulated time from the start (Fig. 8's time series).
func (e Env) RunTreeSeries(pol Policy, t Tree, kind string, n int, seed uint64, warm, measure, bin int64) (FabricStats, *Series, error) {
	if bin < 1_000 || (warm+measure)/bin > 100_000 {
		return FabricStats{}, nil, fmt.Errorf("series bin = %d ns: want at least 1us and at most 100,000 bins", bin)
	}
	ts := &Series{Bin: bin}
	st, err := e.runTree(pol, t, kind, n, seed, warm, measure, ts)
	return st, ts, err
}

func (e Env) runTree(pol Policy, t Tree, kind string, n int, seed uint64, warm, measure int64, ts *Series) (FabricStats, error) {
	end := warm + measure
	size := max(int64(float64(e.LinkRate)/8*float64(end)/1e9), 1<<20)
	wl := sim.WorkloadConfig{Size: sim.Size(size), Jitter: config.Duration(e.Jitter)}
	senders := n
	switch kind {
	case "many-to-one":
		if n < 1 || n > t.Hosts-1 {
			return FabricStats{}, fmt.Errorf("many-to-one: %d flows on %d hosts: want 1..%d", n, t.Hosts, t.Hosts-1)
		}
		wl.Kind, wl.Senders, wl.Receiver = "incast", n, 0
	case "all-to-all":
		if n < t.Hosts || n%t.Hosts != 0 || n > t.Hosts*(t.Hosts-1) {
			return FabricStats{}, fmt.Errorf("all-to-all: %d flows on %d hosts: want a multiple of %d up to %d", n, t.Hosts, t.Hosts, t.Hosts*(t.Hosts-1))
		}
		wl.Kind, wl.Window, senders = "all_to_all", n/t.Hosts, t.Hosts
	default:
		return FabricStats{}, fmt.Errorf("tree test %q: want many-to-one or all-to-all", kind)
	}
	topo := sim.TopologyConfig{Kind: "leafspine", Hosts: t.Hosts, Leaves: t.Leaves, Spines: t.Spines,
		LinkRate: config.Rate(e.LinkRate), LinkLatency: config.Duration(e.LinkLatency),
		Queue: sim.QueueConfig{BDPs: e.QueueBDPs, Kmin: 0.2, Kmax: 0.8}}
	r, probes, _, err := e.simulate(pol, fmt.Sprintf("rlcc-%s-%d", kind, n), topo, wl, size, int64(n)*size, seed, warm, end, end, ts)
	if err != nil {
		return FabricStats{}, err
	}
	st := FabricStats{Flows: n, Trims: r.Trims, WallSeconds: r.WallSeconds}
	var bytes int64
	var rs, rn float64
	for _, p := range probes {
		bytes += p.bytes
		rs += p.rttSum
		rn += p.rttN
		st.Losses += p.losses
		st.AllLosses += p.allLoss
	}
	st.Goodput = float64(bytes) * 8 / (float64(e.LinkRate) * float64(measure) / 1e9 * float64(senders))
	if kind == "many-to-one" {
		st.Goodput *= float64(senders) // one receiver's link is the capacity
	}
	if rn > 0 {
		st.RTTus = rs / rn / 1e3
	}
	return st, nil
}

// Series is a run's totals over every flow per interval of Bin ns from time 0.
type Series struct {
	Bin    int64
	Bytes  []int64   // payload acknowledged
	RTTSum []float64 // sum of RTT samples, ns
	RTTN   []float64 // RTT samples
	Losses []uint64  // packets judged lost
}

// add counts one ACK (bytes, an RTT sample if rtt > 0) or one loss at now.
func (s *Series) add(now, bytes, rtt int64, loss bool) {
	i := int(now / s.Bin)
	for len(s.Bytes) <= i {
		s.Bytes, s.RTTSum, s.RTTN, s.Losses = append(s.Bytes, 0), append(s.RTTSum, 0), append(s.RTTN, 0), append(s.Losses, 0)
	}
	s.Bytes[i] += bytes
	if rtt > 0 {
		s.RTTSum[i] += float64(rtt)
		s.RTTN[i]++
	}
	if loss {
		s.Losses[i]++
	}
}
