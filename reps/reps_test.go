package reps

import (
	"math/rand/v2"
	"testing"
)

func TestECMPKeepsOneEVInRange(t *testing.T) {
	seen := map[uint16]bool{}
	for seed := uint64(0); seed < 200; seed++ {
		e := NewECMP(rand.New(rand.NewPCG(seed, 1)), 32)
		ev := e.NextEV(0, 4096, false)
		if ev >= 32 {
			t.Fatalf("EV %d outside an EVS of 32", ev)
		}
		e.OnAck(1, ev, true, 10)
		e.OnLoss(2, ev, 0)
		if e.NextEV(3, 4096, true) != ev {
			t.Fatal("ECMP changed its EV")
		}
		seen[ev] = true
	}
	if len(seen) < 16 {
		t.Fatalf("only %d distinct EVs over 200 connections", len(seen))
	}
	var _ Balancer = &ECMP{}
}
