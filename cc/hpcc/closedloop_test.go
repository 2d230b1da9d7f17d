package hpcc_test

import (
	"slices"
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/cctest"
	"github.com/smartt-transport/smartt/cc/hpcc"
	"github.com/smartt-transport/smartt/transport"
)

// rig builds the closed-loop rig with INT on (the test network's port stamps records)
// and HPCC on every sender, with deep buffers (bdps BDPs: HPCC's lossless setting, where
// the line-rate first window queues instead of being trimmed).
func rig(t *testing.T, n int, bdps float64, sample int64, mod func(*hpcc.Config)) (*cctest.Rig, []*cctest.Recorder) {
	recs := make([]*cctest.Recorder, n)
	cfg := cctest.Config(true)
	hc := cfg.HPCC
	if mod != nil {
		mod(&hc)
	}
	p, err := hpcc.NewParams(hc, cfg.Network())
	if err != nil {
		t.Fatal(err)
	}
	r := cctest.New(t, cctest.Options{Senders: n, Trim: true, Seed: 11, BufferBDPs: bdps, SampleNs: sample,
		Mod: func(c *transport.Config) { c.CC, c.INT = "hpcc", true },
		NewCC: func(i int) cc.Controller {
			recs[i] = &cctest.Recorder{Controller: hpcc.New(p), Record: true}
			return recs[i]
		}})
	return r, recs
}

// TestIncastNearZeroQueue: 8 senders x 8 MiB into one port: HPCC completes within 1.2x
// ideal, keeps the bottleneck's median queue over the middle half of the incast below
// 5 % of a BDP (near-zero queue at high utilisation, the paper's claim), and the shares
// over the first half are fair (Jain >= 0.9).
func TestIncastNearZeroQueue(t *testing.T) {
	r, recs := rig(t, 8, 8, 500, nil)
	took, ideal := r.Incast(8 << 20)
	var shares []float64
	for _, f := range recs {
		shares = append(shares, float64(f.AckedAt(r.Net.Now()-took/2)))
	}
	var q []int
	for _, s := range r.Net.Samples(r.RXAddr) {
		if s.Time > r.Net.Now()-took*3/4 && s.Time < r.Net.Now()-took/4 {
			q = append(q, s.Data)
		}
	}
	slices.Sort(q)
	ps := r.Net.PortStats(r.RXAddr)
	j := cctest.Jain(shares)
	t.Logf("hpcc: %.3f x ideal, Jain %.3f, median queue %d B (BDP %d), max %d, trims %d", float64(took)/float64(ideal), j, q[len(q)/2], cctest.BDP(), ps.MaxDataBytes, ps.Trims)
	if float64(took) > 1.2*float64(ideal) {
		t.Errorf("incast took %.3f x ideal", float64(took)/float64(ideal))
	}
	if len(q) < 100 || q[len(q)/2] > cctest.BDP()/20 {
		t.Errorf("median queue %d bytes over %d samples: not near zero (BDP %d)", q[len(q)/2], len(q), cctest.BDP())
	}
	if j < 0.9 {
		t.Errorf("Jain %.3f", j)
	}
}

// TestLongFlowsConverge: a long flow runs alone, then three more join: HPCC's additive
// increase brings the four to fair shares (Jain >= 0.9 over the last quarter) while
// the link stays busy (>= 90 % of the line rate acknowledged in that window).
func TestLongFlowsConverge(t *testing.T) {
	// W_AI of 1 % of the BDP (the paper's rule with N = 5 expected flows): a few hundred
	// RTTs to converge from one flow's BDP.
	r, recs := rig(t, 4, 4, 0, func(c *hpcc.Config) { c.ExpectedFlows = 5 })
	r.Send(0, 1<<30)
	r.Run(1_000_000, nil)
	for i := 1; i < 4; i++ {
		r.Send(i, 1<<30)
	}
	const run = 8_000_000
	r.Run(run, nil)
	end := r.Net.Now()
	from := end - run/4
	var shares []float64
	total := 0.0
	for _, f := range recs {
		b := float64(f.AckedAt(end) - f.AckedAt(from))
		shares = append(shares, b)
		total += b
	}
	util := total * 8 / float64(run/4) / 100 // Gbit/s over 100 Gbit/s
	j := cctest.Jain(shares)
	t.Logf("hpcc: Jain %.3f over the last %d us, utilisation %.3f, shares %v", j, run/4/1000, util, shares)
	if j < 0.9 {
		t.Errorf("Jain %.3f", j)
	}
	if util < 0.9 {
		t.Errorf("utilisation %.3f", util)
	}
}
