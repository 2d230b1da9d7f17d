package reps

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/smartt-transport/smartt/cc"
)

// An unmarked ACK clocks exactly one packet onto its EV, a marked one every second time;
// with nothing clocked, and once per base RTT regardless, the next EV is a random probe.
func TestMPRDMAAckClocking(t *testing.T) {
	env := Env{EVS: 1 << 16, BaseRTT: 10_000}
	m := NewMPRDMA(env, rand.New(rand.NewPCG(3, 3)))
	now := int64(t0)
	m.NextEV(now, 4096, false) // the probe that starts the RTT
	m.OnAck(now+1, 100, false, 0)
	m.OnAck(now+2, 200, true, 0) // half a packet: nothing yet
	m.OnAck(now+3, 300, false, 0)
	m.OnAck(now+4, 200, true, 0) // the second half: one packet on 200
	for i, want := range []uint16{100, 300, 200} {
		if got := m.NextEV(now+10+int64(i), 4096, false); got != want {
			t.Fatalf("packet %d on EV %d, want the clocked %d", i, got, want)
		}
	}
	// Nothing clocked: a random EV (not one the ACKs named, with 65,536 EVs).
	if ev := m.NextEV(now+20, 4096, false); ev == 100 || ev == 200 || ev == 300 {
		t.Fatalf("unclocked packet reused EV %d", ev)
	}
	// A base RTT after the last probe, a clocked EV waits one packet for a probe.
	m.OnAck(now+30, 7, false, 0)
	if ev := m.NextEV(now+20+env.BaseRTT, 4096, false); ev == 7 {
		t.Fatal("no probe after a base RTT")
	}
	if ev := m.NextEV(now+21+env.BaseRTT, 4096, false); ev != 7 {
		t.Fatalf("EV %d after the probe, want the clocked 7", ev)
	}
	// A loss clocks nothing; more ACKs than slots keep the newest.
	m.OnLoss(now, 9, cc.LossTimeout)
	for i := range mprdmaSlots + 3 {
		m.OnAck(now+40, uint16(1000+i), false, 0)
	}
	if ev := m.NextEV(now+41+env.BaseRTT/2, 4096, false); ev != 1003 {
		t.Fatalf("EV %d, want 1003 (the oldest of the newest %d)", ev, mprdmaSlots)
	}
	if c := m.Cost(); c.StateBytes != 22 || c.Name != "mprdma" {
		t.Fatalf("cost %+v", c)
	}
}

// BitMap sprays over all its paths once per cycle, skips a penalised path as many times
// as it was penalised (CE 1, trim 4, timeout 15, capped at 15) and ignores foreign EVs.
func TestBitmapPenaltiesAndRotation(t *testing.T) {
	b := NewBitmap(Env{EVS: 1 << 16}, rand.New(rand.NewPCG(5, 5)))
	if b.paths != bitmapPaths {
		t.Fatalf("%d paths, want %d", b.paths, bitmapPaths)
	}
	count := func(cycles int) map[uint16]int {
		c := map[uint16]int{}
		for range cycles * int(b.paths) {
			c[b.NextEV(0, 4096, false)]++
		}
		return c
	}
	c := count(1)
	if len(c) != bitmapPaths {
		t.Fatalf("one cycle used %d distinct EVs, want all %d", len(c), bitmapPaths)
	}
	evs := slices.Sorted(maps.Keys(c))[:3] // sorted: the test must not depend on map order
	b.OnAck(0, evs[0], true, 0)
	b.OnLoss(0, evs[1], cc.LossTrim)
	b.OnLoss(0, evs[2], cc.LossTimeout)
	b.OnLoss(0, evs[2], cc.LossTimeout) // capped at 15
	b.OnAck(0, b.off-1, true, 0)        // not one of this connection's paths: ignored
	for i, want := range []uint8{1, 4, 15} {
		if p := b.penalty(uint16((int(evs[i]) - int(b.off) + b.evs) % b.evs)); p != want {
			t.Fatalf("path %d penalty %d, want %d", i, p, want)
		}
	}
	// Skipped paths decay back to 0; the more penalised, the fewer packets meanwhile.
	c = count(40)
	for i := range b.paths {
		if p := b.penalty(i); p != 0 {
			t.Fatalf("path %d still penalised (%d) after 40 cycles", i, p)
		}
	}
	med := slices.Sorted(maps.Values(c))[len(c)/2]
	if !(c[evs[2]]+10 <= med && c[evs[1]]+2 <= med && c[evs[2]] < c[evs[1]]) {
		t.Errorf("packets on paths penalised 1, 4, 15: %d, %d, %d; median path %d", c[evs[0]], c[evs[1]], c[evs[2]], med)
	}
	// Every path penalised: the rotation still sends (on the last path it looked at).
	for i := range b.paths {
		b.setPenalty(i, bitmapMaxPenalty)
	}
	if ev := b.NextEV(0, 4096, false); int(ev) >= b.evs {
		t.Fatalf("EV %d out of range", ev)
	}
	// A small EV space: as many paths as the largest power of two within it.
	s := NewBitmap(Env{EVS: 100}, rand.New(rand.NewPCG(1, 1)))
	if s.paths != 64 || s.Cost().StateBytes != 32+8 {
		t.Fatalf("EVS 100: %d paths, cost %+v", s.paths, s.Cost())
	}
	for range 1000 {
		if ev := s.NextEV(0, 4096, false); ev >= 100 {
			t.Fatalf("EV %d outside an EVS of 100", ev)
		}
	}
}
