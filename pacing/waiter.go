package pacing

import (
	"fmt"
	"runtime"
	"time"
	_ "unsafe" // for go:linkname
)

//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Now returns the monotonic clock in ns, the clock the daemon gives the engine and the
// Waiter's deadlines are on (only differences are meaningful).
func Now() int64 { return nanotime() }

// Strategy is how a Waiter waits for a deadline.
type Strategy uint8

// Strategies; see docs/pacing.md for their measured accuracy on this host.
const (
	// Nanosleep blocks the OS thread in nanosleep(2) (Linux's hrtimer, late by the
	// thread's timer slack, 50 us by default) until SpinBelow (DefaultNanosleepSpin)
	// before the deadline, then spins: accurate to tens of ns at the median without
	// burning a core for long waits. The default (docs/pacing.md has the measurements).
	Nanosleep Strategy = iota
	// Hybrid sleeps with a Go timer until SpinBelow (DefaultSpinBelow) before the
	// deadline, then spins on the clock, yielding to other goroutines.
	Hybrid
	// Sleep uses a Go timer alone: cheap, but a sub-millisecond wait takes about 1 ms.
	Sleep
	// Spin never sleeps: exact to the clock read, and burns a core while waiting.
	Spin
)

// String names the strategy.
func (s Strategy) String() string {
	switch s {
	case Hybrid:
		return "hybrid"
	case Sleep:
		return "sleep"
	case Spin:
		return "spin"
	case Nanosleep:
		return "nanosleep"
	}
	return fmt.Sprintf("strategy(%d)", uint8(s))
}

// DefaultSpinBelow is Hybrid's spin window. The Go runtime sleeps in epoll with
// millisecond resolution, so a timer shorter than 1 ms fires after about 1 ms and longer
// ones up to ~100 us late on the host measured (docs/pacing.md): Hybrid spins through
// every wait shorter than this and sleeps only the part of longer waits before it.
const DefaultSpinBelow = 1500 * time.Microsecond

// DefaultNanosleepSpin is Nanosleep's spin window: above Linux's default 50 us timer
// slack plus the wake-up latency measured.
const DefaultNanosleepSpin = 100 * time.Microsecond

// Waiter blocks the daemon's loop until a deadline (ns on Now's clock) with a chosen
// strategy. The zero value is a Nanosleep waiter with DefaultNanosleepSpin.
type Waiter struct {
	Strategy  Strategy
	SpinBelow time.Duration // spin for the last SpinBelow (0: DefaultSpinBelow, or DefaultNanosleepSpin for Nanosleep)
	timer     *time.Timer
}

// WaitUntil returns at or after deadline (never before, except that Sleep may return
// early if the Go runtime's timer does) and reports how late it returned, ns.
func (w *Waiter) WaitUntil(deadline int64) (late int64) {
	now := nanotime()
	if now >= deadline {
		return now - deadline
	}
	switch w.Strategy {
	case Sleep:
		w.sleep(deadline - now)
	case Spin:
	case Hybrid:
		spin := w.SpinBelow
		if spin <= 0 {
			spin = DefaultSpinBelow
		}
		if d := deadline - now - int64(spin); d > 0 {
			w.sleep(d)
		}
	default: // Nanosleep
		spin := w.SpinBelow
		if spin <= 0 {
			spin = DefaultNanosleepSpin
		}
		if d := deadline - now - int64(spin); d > 0 {
			nanosleep(d) // EINTR only shortens the sleep; the spin finishes it
		}
	}
	for {
		now = nanotime()
		if now >= deadline {
			return now - deadline
		}
		if w.Strategy != Spin && deadline-now > 2_000 {
			runtime.Gosched() // let other goroutines run while more than 2 us remain
		}
	}
}

func (w *Waiter) sleep(d int64) {
	if w.timer == nil {
		w.timer = time.NewTimer(time.Duration(d))
	} else {
		w.timer.Reset(time.Duration(d))
	}
	<-w.timer.C
}
