package smartt_test

import (
	"fmt"
	"testing"

	"github.com/smartt-transport/smartt/cc/smartt"
)

// TestIncast8to1Trimming: eight senders start an 8 MiB message each at once toward one
// receiver. All complete, none is lost, QuickAdapt fires, and the whole incast takes at
// most 1.25x the ideal (total bytes at the link rate plus one base RTT).
func TestIncast8to1Trimming(t *testing.T) {
	for _, fixed := range []bool{false, true} {
		r, took := incast(t, true, fixed, 0, 0)
		s := r.sum()
		ideal := idealIncast()
		ps := r.Net.PortStats(r.RXAddr)
		t.Logf("fixed=%v: %d x 8 MiB in %.1f us = %.3f x ideal (%.1f us); trims %d, QuickAdapt %d, FD %d MD %d FI %d MI %d, WTD held %d, FastIncrease %d, clampMin %d, timeouts %d",
			fixed, len(r.flows), float64(took)/1e3, float64(took)/float64(ideal), float64(ideal)/1e3,
			ps.Trims, s.QuickAdapt, s.FairDecrease, s.MultDecrease, s.FairIncrease, s.MultIncrease, s.WTDHeld, s.FastIncrease, s.ClampMin, s.LossTimeout)
		if float64(took) > 1.25*float64(ideal) {
			t.Errorf("fixed=%v: incast took %.3f x ideal, want <= 1.25", fixed, float64(took)/float64(ideal))
		}
		if s.QuickAdapt == 0 || ps.Trims == 0 {
			t.Errorf("fixed=%v: QuickAdapt %d, trims %d: the incast never overflowed the queue?", fixed, s.QuickAdapt, ps.Trims)
		}
	}
}

const incastMsg = 8 << 20

func idealIncast() int64 {
	return int64(8*incastMsg)*8*1_000_000_000/linkRate + baseRTT()
}

type incastRun struct {
	r    *rig
	took int64
}

// incast runs the 8:1 incast (reactEvery: Config.ReactEvery, 0 the default) and returns
// the time until every message was delivered and acknowledged. Each set-up runs once per
// test binary: TestResultsTable reads the runs of the tests beside it.
func incast(t *testing.T, trim, fixed bool, rto int64, reactEvery int) (*rig, int64) {
	t.Helper()
	x := once(fmt.Sprint("incast", trim, fixed, rto, reactEvery), func() incastRun {
		r, took := runIncast(t, trim, fixed, rto, reactEvery)
		return incastRun{r, took}
	})
	return x.r, x.took
}

func runIncast(t *testing.T, trim, fixed bool, rto int64, reactEvery int) (*rig, int64) {
	t.Helper()
	o := rigOpts{senders: 8, trim: trim, fixed: fixed, seed: 7, rto: rto}
	if reactEvery > 0 {
		o.mod = func(c *smartt.Config) { c.ReactEvery = reactEvery }
	}
	r := newRig(t, o)
	for i := range r.TX {
		r.Send(i, incastMsg)
	}
	if !r.Run(1_000_000_000, func() bool { return r.Sent() == 8 && len(r.RecvAt) == 8 }) {
		t.Fatalf("incast incomplete: %d sent, %d received at %d ns", r.Sent(), len(r.RecvAt), r.Net.Now())
	}
	if r.RecvBytes != 8*incastMsg || r.Failed != 0 {
		t.Fatalf("received %d bytes, %d failed", r.RecvBytes, r.Failed)
	}
	return r, r.Net.Now()
}

// TestIncastNoTrimming: the same incast on switches that drop instead of trimming.
// Losses are found by SACK gaps and timeouts, which drive QuickAdapt, and md is
// doubled. Everything completes; the test reports the slowdown against the trimming
// run in base RTTs (the paper: within two base RTTs).
func TestIncastNoTrimming(t *testing.T) {
	rt, withTrim := incast(t, true, false, 0, 0)
	r, took := incast(t, false, false, noTrimRTO, 0)
	s := r.sum()
	ps := r.Net.PortStats(r.RXAddr)
	st := r.TX[0].Stats()
	slower := float64(took-withTrim) / float64(baseRTT())
	t.Logf("no trimming: %.1f us = %.3f x ideal, %+.1f us (%.1f base RTTs) vs trimming (%.1f us); drops %d, QuickAdapt %d (trimming: %d), loss cuts sack %d timeout %d; sender 0 retx sack %d timeout %d",
		float64(took)/1e3, float64(took)/float64(idealIncast()), float64(took-withTrim)/1e3, slower, float64(withTrim)/1e3,
		ps.Drops, s.QuickAdapt, rt.sum().QuickAdapt, s.LossSack, s.LossTimeout, st.RetxSack, st.RetxTimeout)
	if ps.Drops == 0 || s.QuickAdapt == 0 {
		t.Errorf("drops %d, QuickAdapt %d: the drops did not drive QuickAdapt", ps.Drops, s.QuickAdapt)
	}
	if float64(took) > 1.25*float64(idealIncast()) {
		t.Errorf("without trimming the incast took %.3f x ideal", float64(took)/float64(idealIncast()))
	}
}

// noTrimRTO is the RTO floor without trimming: SMaRTT wants aggressive timeouts, here
// the REPS paper's full-queue traversal plus base RTT (2 base RTTs) with 20 % margin.
var noTrimRTO = baseRTT() * 24 / 10

// TestIncastReactEvery50: reacting once per 50 ACKs (the paper: within 5 % of per-ACK)
// still completes the trimming incast within 1.25x of ideal; the test reports the ratio.
func TestIncastReactEvery50(t *testing.T) {
	_, perAck := incast(t, true, false, 0, 0)
	r, took := incast(t, true, false, 0, 50)
	t.Logf("react_every 50: %.1f us vs %.1f us per ACK (%.3f x); QuickAdapt %d",
		float64(took)/1e3, float64(perAck)/1e3, float64(took)/float64(perAck), r.sum().QuickAdapt)
	if float64(took) > 1.25*float64(idealIncast()) {
		t.Errorf("react_every 50: %.3f x ideal", float64(took)/float64(idealIncast()))
	}
}
