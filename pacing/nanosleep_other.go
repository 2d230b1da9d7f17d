//go:build !linux

package pacing

import "time"

// nanosleep sleeps d ns; without Linux's nanosleep(2) wrapper, through the Go timer
// (the spin after it absorbs the coarser wake-up).
func nanosleep(d int64) { time.Sleep(time.Duration(d)) }
