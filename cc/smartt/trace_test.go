package smartt_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/smartt-transport/smartt/cc/smartt"
)

// TestFixedMatchesFloat records the feedback of a long closed-loop run (float SMaRTT in
// the loop: incasts, flows arriving and leaving, trims, with and without trimming) and
// feeds every event, in order, to a fixed-point controller as well. At every one of
// more than a million ACKs the two windows stay within one MTU of each other; the test
// reports the largest difference and compares the decision counters.
func TestFixedMatchesFloat(t *testing.T) {
	if testing.Short() {
		t.Skip("long trace")
	}
	total, worst := 0, 0.0
	for _, trim := range []bool{true, false} {
		want := traceACKs * 2 / 3
		if !trim {
			want = traceACKs / 3
		}
		x := trace(t, trim, want)
		total += x.acks
		worst = max(worst, x.maxErr)
		t.Logf("trimming=%v: %d ACKs, max |fixed - float| window difference %.4f bytes; %s", trim, x.acks, x.maxErr, x.mismatch)
	}
	t.Logf("total %d ACKs, max window difference %.4f bytes", total, worst)
	if total < 1_000_000 && traceACKs >= 1_000_000 {
		t.Errorf("trace has %d ACKs, want >= 1e6", total)
	}
}

// traceOut is one trace's result: ACKs, the largest window difference, the counters'
// comparison and the float controllers' counters.
type traceOut struct {
	acks      int
	maxErr    float64
	mismatch  string
	identical bool
	st        smartt.Stats
}

// trace runs traceRun once per test binary.
func trace(t *testing.T, trim bool, want int) traceOut {
	return once(fmt.Sprint("trace", trim, want), func() traceOut { return traceRun(t, trim, want) })
}

func traceRun(t *testing.T, trim bool, want int) traceOut {
	var maxErr float64
	r := newRig(t, rigOpts{senders: 8, trim: trim, shadow: true, seed: 11, rto: noTrimRTO})
	rng := rand.New(rand.NewPCG(42, 43))
	queued := make([]int, len(r.TX))
	count := func() int {
		n := 0
		for _, f := range r.flows {
			n += int(f.stats().Acks)
		}
		return n
	}
	for count() < want {
		if r.Net.Now() > 10_000_000_000 {
			t.Fatalf("trimming=%v: only %d ACKs after 10 s of virtual time", trim, count())
		}
		for i := range r.TX {
			// Each sender keeps at most one message queued; new ones arrive at random,
			// log-uniform in 64 KiB..16 MiB, so flows come and go and incasts form.
			if queued[i] == len(r.SentAt[i]) && rng.IntN(4) == 0 {
				size := int(math.Exp(math.Log(64<<10) + rng.Float64()*math.Log(256)))
				r.Send(i, size)
				queued[i]++
			}
		}
		r.Run(100_000, nil)
	}
	var lines []string
	for i, f := range r.flows {
		if f.overMTU > 0 {
			t.Errorf("trimming=%v flow %d: window differed by more than one MTU at %d of %d steps (max %.1f)", trim, i, f.overMTU, f.steps, f.maxErr)
		}
		maxErr = max(maxErr, f.maxErr)
		a, b := f.stats(), f.shadow.(*smartt.Fixed).Stats()
		if a != b {
			lines = append(lines, fmt.Sprintf("flow %d float %+v fixed %+v", i, a, b))
		}
	}
	mismatch := "decision counters identical"
	if len(lines) > 0 {
		mismatch = fmt.Sprintf("decision counters differ on %d flows: %v", len(lines), lines)
	}
	st := r.sum()
	mismatch += fmt.Sprintf("; decisions FD %d MD %d FI %d MI %d WTD-held %d QuickAdapt %d FastIncrease %d (%d ACKs) ignored %d, loss cuts trim %d timeout %d sack %d",
		st.FairDecrease, st.MultDecrease, st.FairIncrease, st.MultIncrease, st.WTDHeld, st.QuickAdapt, st.FastIncrease, st.FastIncreaseAcks, st.Ignored, st.LossTrim, st.LossTimeout, st.LossSack)
	return traceOut{count(), maxErr, mismatch, len(lines) == 0, st}
}

// traceACKs is the length of the recorded trace (two thirds with trimming, one third without).
var traceACKs = 1_050_000
