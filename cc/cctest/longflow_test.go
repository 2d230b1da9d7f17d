package cctest_test

import (
	"fmt"
	"testing"

	"github.com/smartt-transport/smartt/cc/cctest"
	"github.com/smartt-transport/smartt/test/results"
	"github.com/smartt-transport/smartt/transport"
)

// TestLongFlowsPerPaper: four long flows join one bottleneck 200 us apart (1 ms for the
// controllers whose papers converge over milliseconds); over the second half of the time
// they all run, each controller must show what its paper claims for it, in shares (Jain),
// link use (of the payload rate) and the bottleneck queue (in BDPs; the port marks ECN
// from 0.2 to 0.8 BDP, holds 1 BDP and trims beyond).
func TestLongFlowsPerPaper(t *testing.T) {
	type claim struct {
		name       string
		long       bool    // 1 ms apart, 20 ms together (else 200 us apart, 2 ms together)
		jain, util float64 // at least
		qMin, qMax float64 // mean queue within, BDPs
		utilMax    float64 // at most (0: no bound)
		why        string
		mod        func(*transport.Config)
	}
	table := "| cc | flows join every | window | Jain | utilisation | queue mean / p99, BDP | trims | what its paper says |\n|---|---|---|---|---|---|---|---|\n"
	for _, c := range []claim{
		{name: "smartt", jain: 0.95, util: 0.97, qMax: 0.5,
			why: "SMaRTT: fair and full, the queue below its target RTT (1.5 base RTTs: 0.5 BDP of queue)"},
		{name: "smartt-fixed", jain: 0.95, util: 0.97, qMax: 0.5, why: "the integer SMaRTT behaves as the float one"},
		{name: "nscc", long: true, jain: 0.95, util: 0.97, qMin: 0.6, qMax: 0.9,
			why: "NSCC: the queueing delay settles at its target, 0.75 base RTTs with trimming"},
		{name: "swift", jain: 0.99, util: 0.97, qMin: 0.25, qMax: 1,
			why: "Swift: delay held at its target (1.25 base RTTs plus flow scaling): 0.25 BDP of queue or more"},
		{name: "dctcp", jain: 0.95, util: 0.97, qMin: 0.1, qMax: 0.8,
			why: "DCTCP: the queue hovers in the marking band (0.2..0.8 BDP), full link"},
		{name: "mprdma", jain: 0.95, util: 0.97, qMin: 0.1, qMax: 0.8,
			why: "MPRDMA (per-ACK DCTCP): the queue in the marking band"},
		{name: "dcqcn", long: true, jain: 0.8, util: 0.95, qMax: 0.2,
			why: "DCQCN: a short queue (CNPs from the first marks), shares converging over milliseconds (its paper's timescale)"},
		{name: "hpcc", long: true, jain: 0.95, util: 0.85, utilMax: 0.97, qMax: 0.05, mod: func(c *transport.Config) { c.INT = true },
			why: "HPCC: near-zero queue at its target utilisation eta = 0.95, fair after W_AI's additive increases"},
		{name: "eqds", jain: 0.99, util: 0.97, qMax: 0.1,
			why: "EQDS: the receiver's pacer shares the link exactly and keeps its queue empty"},
		{name: "bbr", long: true, jain: 0.9, util: 0.97, qMax: 1,
			why: "BBR: full link whatever the losses; several v1 flows keep the shallow buffer full (Hock et al., 2017)"},
		{name: "rlcc", jain: 0.95, util: 0.97, qMax: 1, why: "RL-CC: fair and full"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stagger, overlap := int64(200_000), int64(2_000_000)
			if c.long {
				stagger, overlap = 1_000_000, 20_000_000
			}
			r := cctest.LongFlows(t, c.name, 4, stagger, overlap, c.mod)
			table += fmt.Sprintf("| %s | %d us | last %d ms | %.3f | %.3f | %.2f / %.2f | %d | %s |\n",
				c.name, stagger/1000, overlap/2_000_000, r.Jain, r.Utilisation, r.QueueMean, r.QueueP99, r.Trims, c.why)
			if r.Jain < c.jain || r.Utilisation < c.util || (c.utilMax > 0 && r.Utilisation > c.utilMax) ||
				r.QueueMean < c.qMin || r.QueueMean > c.qMax {
				t.Errorf("%s\n got Jain %.3f (want >= %.2f), utilisation %.3f (want >= %.2f, <= %v), queue mean %.2f BDP (want %.2f..%.2f)",
					c.why, r.Jain, c.jain, r.Utilisation, c.util, c.utilMax, r.QueueMean, c.qMin, c.qMax)
			}
		})
	}
	if !t.Failed() && !testing.Short() {
		results.Check(t, "cc-longflows", table)
	}
}

// TestSwiftFlowScaling: Swift raises its target delay as windows shrink (flow-based
// scaling), so eight flows hold a longer queue than two; SMaRTT's target does not scale,
// so its queue stays under the same bound for both.
func TestSwiftFlowScaling(t *testing.T) {
	two := cctest.LongFlows(t, "swift", 2, 200_000, 2_000_000, nil)
	eight := cctest.LongFlows(t, "swift", 8, 200_000, 2_000_000, nil)
	if eight.QueueMean <= two.QueueMean*1.1 {
		t.Errorf("swift: queue %.2f BDP with 8 flows, %.2f with 2: flow scaling should lengthen it", eight.QueueMean, two.QueueMean)
	}
	for _, n := range []int{2, 8} {
		if r := cctest.LongFlows(t, "smartt", n, 200_000, 2_000_000, nil); r.QueueMean > 0.5 {
			t.Errorf("smartt, %d flows: queue %.2f BDP above its target's 0.5", n, r.QueueMean)
		}
	}
}
