package pacing

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// paceRun sends n packets of size bytes at rate bytes/s through a Pacer, waiting for each
// departure with w, and returns the departure times. It stops early once twice the
// ideal duration has passed, so a coarse strategy cannot run away.
func paceRun(w *Waiter, n, size int, rate int64, burst int) []int64 {
	p := Pacer{Burst: burst}
	out := make([]int64, 0, n)
	now := Now()
	stop := now + 2*int64(n)*int64(size)*1_000_000_000/rate
	for range n {
		if now > stop {
			break
		}
		if t := p.Earliest(now, rate); t > now {
			w.WaitUntil(t)
		}
		now = Now()
		out = append(out, now)
		p.OnSend(now, size, rate)
	}
	return out
}

// gapStats returns the achieved packet rate and the p50/p99 of |gap - ideal| in ns.
func gapStats(ts []int64, pps float64) (achieved, p50, p99 float64) {
	ideal := 1e9 / pps
	errs := make([]float64, 0, len(ts)-1)
	for i := 1; i < len(ts); i++ {
		errs = append(errs, math.Abs(float64(ts[i]-ts[i-1])-ideal))
	}
	slices.Sort(errs)
	achieved = float64(len(ts)-1) * 1e9 / float64(ts[len(ts)-1]-ts[0])
	return achieved, errs[len(errs)/2], errs[len(errs)*99/100]
}

// BenchmarkPacerAccuracy paces 1000-byte packets at 1k, 10k and 100k packets/s for
// 200 ms each (200, 2,000 and 20,000 packets, cut off at 400 ms) with each wait strategy and
// reports the achieved rate relative to the requested one and the p50/p99 error of the
// inter-packet gaps, with strict EDT (burst=0) and with a 4-packet bucket (burst=4).
// Run with -benchtime=1x: one op is one 200 ms run.
//
//	go test -run '^$' -bench PacerAccuracy -benchtime=1x ./pacing/
func BenchmarkPacerAccuracy(b *testing.B) {
	const size = 1000
	for _, burst := range []int{0, 4} {
		for _, st := range []Strategy{Sleep, Hybrid, Nanosleep, Spin} {
			for _, pps := range []int{1_000, 10_000, 100_000} {
				b.Run(fmt.Sprintf("burst=%d/%s/%dkpps", burst, st, pps/1000), func(b *testing.B) {
					w := &Waiter{Strategy: st}
					n := pps / 5
					var ach, p50, p99 float64
					for b.Loop() {
						ts := paceRun(w, n, size, int64(pps*size), burst*size)
						ach, p50, p99 = gapStats(ts, float64(pps))
					}
					b.ReportMetric(ach/float64(pps), "achieved/requested")
					b.ReportMetric(p50, "gap-err-p50-ns")
					b.ReportMetric(p99, "gap-err-p99-ns")
				})
			}
		}
	}
}

// BenchmarkTimerLateness measures how late each strategy returns for waits of 20 us,
// 100 us and 1 ms (the figure Hybrid's spin window is chosen from).
func BenchmarkTimerLateness(b *testing.B) {
	for _, st := range []Strategy{Sleep, Hybrid, Nanosleep, Spin} {
		for _, d := range []time.Duration{20 * time.Microsecond, 100 * time.Microsecond, time.Millisecond} {
			b.Run(fmt.Sprintf("%s/%v", st, d), func(b *testing.B) {
				w := &Waiter{Strategy: st}
				var lates []float64
				for b.Loop() {
					lates = append(lates, float64(w.WaitUntil(Now()+int64(d))))
				}
				slices.Sort(lates)
				b.ReportMetric(lates[len(lates)/2], "late-p50-ns")
				b.ReportMetric(lates[len(lates)*99/100], "late-p99-ns")
			})
		}
	}
}

func TestWaiterNeverEarly(t *testing.T) {
	for _, st := range []Strategy{Hybrid, Spin, Nanosleep, Sleep} {
		w := &Waiter{Strategy: st, SpinBelow: 50 * time.Microsecond}
		for range 20 {
			d := Now() + 30_000
			w.WaitUntil(d)
			if now := Now(); now < d && st != Sleep {
				t.Fatalf("%v returned %d ns early", st, d-now)
			}
		}
	}
	var w Waiter
	if late := w.WaitUntil(Now() - 1000); late < 1000 {
		t.Fatalf("past deadline: late %d", late)
	}
}

func TestBurstCreditIsBounded(t *testing.T) {
	p := Pacer{Burst: 8192}
	const rate = 1_000_000_000 // 4096 B per 4096 ns
	p.OnSend(0, 4096, rate)
	// Woken 100 us late: two packets (8 KiB of credit) may go at once, then spacing resumes.
	now := int64(100_000)
	for i := range 3 {
		if got := p.Earliest(now, rate); got > now {
			t.Fatalf("packet %d delayed to %d", i, got)
		}
		p.OnSend(now, 4096, rate)
	}
	if got := p.Earliest(now, rate); got != now+4096 {
		t.Fatalf("after the burst: %d, want %d", got, now+4096)
	}
}

func TestWindowRate(t *testing.T) {
	if r := WindowRate(1000, 4096, 10_000); r != 100_000_000 {
		t.Fatalf("1000 B per 10 us: %d", r)
	}
	if WindowRate(8192, 4096, 10_000) != 0 || WindowRate(1000, 4096, 0) != 0 {
		t.Fatal("window >= size or no RTT must not pace")
	}
}
