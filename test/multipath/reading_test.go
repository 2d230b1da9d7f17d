package multipath

import (
	"fmt"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/transport"
)

// caseKey names a run of docs/reps.md's first table: case (slow, dead), trimming, lb.
type caseKey struct {
	which string
	trim  bool
	lb    string
}

func share(r Result) float64 { return 100 * float64(r.SlowPackets) / float64(total(r)) }

func fctUS(r Result) string {
	if !r.Done {
		return "not done in 1 s"
	}
	return fmt.Sprintf("%d us", r.FCT/1000)
}

// moreTable is docs/reps.md's table of the runs its reading cites beyond the first
// table: the fixed window, REPS without freezing, coalesced ACKs.
func moreTable(t *testing.T, cc string) string {
	var b strings.Builder
	b.WriteString("| case | REPS | OPS |\n|---|---|---|\n")
	for _, trim := range []bool{true, false} {
		var sl, dd [2]Result
		for i, lb := range []string{"reps", "ops"} {
			sl[i], dd[i] = run(t, slowPath(lb, "fixed", trim)), run(t, deadPath(lb, "fixed", trim))
		}
		fmt.Fprintf(&b, "| fixed window, trimming %v: slow-path share, FCT | %.1f %%, %s | %.1f %%, %s |\n",
			trim, share(sl[0]), fctUS(sl[0]), share(sl[1]), fctUS(sl[1]))
		fmt.Fprintf(&b, "| fixed window, trimming %v: into dead path after t, FCT | %d, %s | %d, %s |\n",
			trim, dd[0].DeadAfterFail, fctUS(dd[0]), dd[1].DeadAfterFail, fctUS(dd[1]))
	}
	s := deadPath("reps", cc, true)
	s.Tune = func(c *transport.Config) { c.REPS.NoFreeze = true }
	nf := run(t, s)
	fmt.Fprintf(&b, "| %s, trimming, `reps.no_freeze`: into dead path after t, FCT | %d, %s | - |\n", cc, nf.DeadAfterFail, fctUS(nf))
	for _, clean := range []bool{false, true} {
		s := slowPath("reps", cc, true)
		s.Tune = func(c *transport.Config) { c.Ack.Every, c.Ack.CleanEVs, c.REPS.CleanEVs = 4, clean, clean }
		r := run(t, s)
		what := "the trigger's EV recycled"
		if clean {
			what = "every clean EV recycled (`ack.clean_evs`, `reps.clean_evs`)"
		}
		fmt.Fprintf(&b, "| %s, trimming, one ACK per 4 packets, %s: slow-path share, FCT | %.1f %%, %s | - |\n", cc, what, share(r), fctUS(r))
	}
	return b.String()
}

// reading is the prose under docs/reps.md's first table, its figures taken from the
// runs (res): a sentence the runs no longer support changes with them.
func reading(t *testing.T, res map[caseKey]Result) string {
	get := func(which string, trim bool, lb string) Result {
		r, ok := res[caseKey{which, trim, lb}]
		if !ok {
			t.Fatalf("no run %s %v %s", which, trim, lb)
		}
		return r
	}
	span := func(f func(trim bool) float64, format string) string {
		a, c := f(true), f(false)
		lo, hi := min(a, c), max(a, c)
		if fmt.Sprintf(format, lo) == fmt.Sprintf(format, hi) {
			return fmt.Sprintf(format, lo)
		}
		return fmt.Sprintf(format+"-"+format, lo, hi)
	}
	const ideal = 1534.0
	repsSlow := func(tr bool) float64 { return float64(get("slow", tr, "reps").FCT / 1000) } // as the table rounds
	opsLater := func(tr bool) float64 {
		return 100 * (float64(get("slow", tr, "ops").FCT)/float64(get("slow", tr, "reps").FCT) - 1)
	}
	retx := func(tr bool) float64 {
		st := get("slow", tr, "reps").Sender
		return float64(st.RetxNack + st.RetxSack + st.RetxTimeout)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "- Slow path: REPS is within %.1f %% of the ideal (%s us) and puts %s %% of its packets on the half-rate path (its capacity share is 12.5 of 87.5 Gbit/s = 14.3 %%), with %s retransmissions; OPS puts %s %% there, queues behind it and finishes %s %% later. ECMP and flowlet (SMaRTT never leaves a flowlet gap) stay on one path: a quarter of the capacity. PLB repaths only after a congested round or a timeout (%.1f %% on the slow path with trimming). MPTCP's eight fixed EVs put %.1f %% on the slow path with seed 1 (%d us).\n",
		100*(max(repsSlow(true), repsSlow(false))/ideal-1), span(repsSlow, "%.0f"),
		span(func(tr bool) float64 { return share(get("slow", tr, "reps")) }, "%.1f"), span(retx, "%.0f"),
		span(func(tr bool) float64 { return share(get("slow", tr, "ops")) }, "%.1f"), span(opsLater, "%.0f"),
		share(get("slow", true, "plb")), share(get("slow", true, "mptcp")), get("slow", true, "mptcp").FCT/1000)
	rd, od := get("dead", true, "reps"), get("dead", true, "ops")
	rdn, odn := get("dead", false, "reps"), get("dead", false, "ops")
	fmt.Fprintf(&b, "- Dead path: REPS sends %d packets into the dead path after the failure with trimming and %d without (OPS: %d and %d, %.0fx more; the few REPS sends are the exploration when a freeze ends while the path is still dead, the paper's \"spikes\") and finishes %.0f %% after its slow-path time; without freezing it sends more (next table). OPS without trimming loses a quarter of every window: SACK-gap detection finds some, backed-off timeouts the rest (%d), and it takes %.1f ms. ECMP (seed 1 hashes it onto the dead path) %s: an ECMP flow cannot leave its path. MPTCP keeps a subflow on the dead path and sends %d packets into it (%.0f ms).\n",
		rd.DeadAfterFail, rdn.DeadAfterFail, od.DeadAfterFail, odn.DeadAfterFail,
		float64(od.DeadAfterFail)/float64(max(rd.DeadAfterFail, 1)),
		100*(float64(rd.FCT)/float64(get("slow", true, "reps").FCT)-1),
		odn.Sender.RetxTimeout, float64(odn.FCT)/1e6, map[bool]string{true: "finishes", false: "never finishes"}[get("dead", true, "ecmp").Done],
		get("dead", true, "mptcp").DeadAfterFail, float64(get("dead", true, "mptcp").FCT)/1e6)
	return b.String()
}
