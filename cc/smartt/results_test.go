package smartt_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/smartt-transport/smartt/test/results"
)

var memo = struct {
	sync.Mutex
	m map[string]any
}{m: map[string]any{}}

// once returns what f computes for key, running f at most once per test binary, so
// TestResultsTable reuses the closed-loop runs of the tests beside it.
func once[T any](key string, f func() T) T {
	memo.Lock()
	defer memo.Unlock()
	if v, ok := memo.m[key]; ok {
		return v.(T)
	}
	v := f()
	memo.m[key] = v
	return v
}

// TestResultsTable prints docs/smartt.md's closed-loop table from the runs of the tests
// above and fails if the page shows other figures (`smartt-lab results` rewrites it):
//
//	go test ./cc/smartt/ -run TestResultsTable -v
func TestResultsTable(t *testing.T) {
	if testing.Short() {
		t.Skip("the fixed-vs-float trace is long")
	}
	var b strings.Builder
	b.WriteString("| test | result |\n|---|---|\n")
	incastRows(t, &b)
	lf := longFlows(t, false)
	fmt.Fprintf(&b, "| 8 long flows (2..12 ms) | throughputs %.2f..%.2f Gbit/s, %.1f Gbit/s total, **Jain %.4f**; queue between Kmin and Kmax in **%.1f %%** of %d samples |\n",
		slices.Min(lf.tput), slices.Max(lf.tput), lf.total, lf.jain, 100*float64(lf.in)/float64(lf.samples), lf.samples)
	brtt := float64(baseRTT())
	_, fi, fiTput, _ := reclaim(t, false)
	_, nofi, nofiTput, _ := reclaim(t, true)
	fmt.Fprintf(&b, "| 7 of 8 flows finish (4 MiB), one (32 MiB) stays | with FastIncrease its window reaches 1 BDP **%.1f base RTTs** after the others finish and it carries %.1f Gbit/s over the next 5 base RTTs; without FastIncrease: %.1f base RTTs and %.1f Gbit/s |\n",
		float64(fi)/brtt, fiTput, float64(nofi)/brtt, nofiTput)
	b.WriteString(traceRow(t))
	_, trim := incast(t, true, false, 0, 0)
	_, noTrim := incast(t, false, false, noTrimRTO, 0)
	fmt.Fprintf(&b, "\nThe trimming-off slowdown is %.1f %% of the incast's time.\n", 100*float64(noTrim-trim)/float64(trim))
	results.Check(t, "smartt-closedloop", b.String())
}

// incastRows writes the table's three 8:1 incast rows.
func incastRows(t *testing.T, b *strings.Builder) {
	ideal := idealIncast()
	r, took := incast(t, true, false, 0, 0)
	rf, tookF := incast(t, true, true, 0, 0)
	s, sf := r.sum(), rf.sum()
	trims, trimsF := r.Net.PortStats(r.RXAddr).Trims, rf.Net.PortStats(rf.RXAddr).Trims
	timeouts := "no timeouts"
	if s.LossTimeout > 0 {
		timeouts = fmt.Sprintf("%d timeouts", s.LossTimeout)
	}
	fixed := "identical"
	if tookF != took || trimsF != trims || sf.QuickAdapt != s.QuickAdapt {
		fixed = fmt.Sprintf("%.1f us, %d trims, QuickAdapt %d", float64(tookF)/1e3, trimsF, sf.QuickAdapt)
		if trimsF == trims && sf.QuickAdapt == s.QuickAdapt {
			fixed = fmt.Sprintf("%.1f us, same trims and QuickAdapts", float64(tookF)/1e3)
		}
		fixed += " (the windows differ by a fraction of a byte, which the closed loop amplifies into slightly different decisions)"
	}
	fmt.Fprintf(b, "| 8:1 incast, 8 MiB each, trimming | all delivered, none failed; %.1f us = **%.3f x ideal** (64 MiB at 100 Gbit/s + base RTT = %.1f us); %d trims; QuickAdapt fired %d times; %s. Fixed point: %s |\n",
		float64(took)/1e3, float64(took)/float64(ideal), float64(ideal)/1e3, trims, s.QuickAdapt, timeouts, fixed)
	_, took50 := incast(t, true, false, 0, 50)
	fmt.Fprintf(b, "| same, `react_every: 50` | %.1f us, %.3f x the per-ACK run (paper: within 5 %%) |\n",
		float64(took50)/1e3, float64(took50)/float64(took))
	rn, tookN := incast(t, false, false, noTrimRTO, 0)
	sn := rn.sum()
	fmt.Fprintf(b, "| same, trimming off | %.1f us = %.3f x ideal, **%+.1f us = %.1f base RTTs** slower than with trimming (paper: within 2 base RTTs); %d drops, losses found by timeouts (%d) and SACK gaps (%d), QuickAdapt %d |\n",
		float64(tookN)/1e3, float64(tookN)/float64(ideal), float64(tookN-took)/1e3, float64(tookN-took)/float64(baseRTT()),
		rn.Net.PortStats(rn.RXAddr).Drops, sn.LossTimeout, sn.LossSack, sn.QuickAdapt)
}

// traceRow is the fixed-vs-float row, from TestFixedMatchesFloat's two traces.
func traceRow(t *testing.T) string {
	a, c := trace(t, true, traceACKs*2/3), trace(t, false, traceACKs/3)
	sum := func(f func(x traceOut) uint64) uint64 { return f(a) + f(c) }
	counters := "every decision counter identical"
	if !a.identical || !c.identical {
		counters = "decision counters differ"
	}
	k := func(n uint64) string { return fmt.Sprintf("%.0f k", float64(n)/1e3) }
	return fmt.Sprintf("| fixed vs float, %d-ACK closed-loop trace (random arrivals of 64 KiB..16 MiB messages on 8 senders, %s ACKs with trimming, %s without; every branch visited: %s FD, %s MD, %s MI, %s FI, %d QuickAdapt, %d FastIncrease activations, %d loss cuts) | **max window difference %.3f bytes**, never more than one MTU; %s |\n",
		a.acks+c.acks, k(uint64(a.acks)), k(uint64(c.acks)),
		k(sum(func(x traceOut) uint64 { return x.st.FairDecrease })), k(sum(func(x traceOut) uint64 { return x.st.MultDecrease })),
		k(sum(func(x traceOut) uint64 { return x.st.MultIncrease })), k(sum(func(x traceOut) uint64 { return x.st.FairIncrease })),
		sum(func(x traceOut) uint64 { return x.st.QuickAdapt }), sum(func(x traceOut) uint64 { return x.st.FastIncrease }),
		sum(func(x traceOut) uint64 { return x.st.LossTrim + x.st.LossTimeout + x.st.LossSack }),
		max(a.maxErr, c.maxErr), counters)
}
