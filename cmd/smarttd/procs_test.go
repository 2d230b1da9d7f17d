package main

import (
	"runtime"
	"testing"
)

// TestApplyProcs: procs sets GOMAXPROCS; 0 leaves it as it was.
func TestApplyProcs(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(was)
	applyProcs(0)
	if got := runtime.GOMAXPROCS(0); got != was {
		t.Fatalf("procs 0 changed GOMAXPROCS from %d to %d", was, got)
	}
	want := 1
	if was == 1 {
		want = 2
	}
	applyProcs(want)
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Fatalf("procs %d: GOMAXPROCS %d", want, got)
	}
}
