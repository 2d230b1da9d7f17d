package netbed

import (
	"testing"

	"smartt/test/switchport"
	"smartt/test/uswitch"
)

// TestHooksAllocateNothing: the per-frame and per-tick hooks the fabric installs in the
// switch loop (flaky loss, queue sampling) allocate nothing once set up, and the sampler
// repeats the value it sees for slots a late wake-up missed.
func TestHooksAllocateNothing(t *testing.T) {
	p, err := switchport.New[*uswitch.Frame](switchport.Config{Rate: 1e9, DataBytes: 1 << 16}, 1)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	m := sampler{interval: 1000, t0: -1, max: n, ports: []int{0}, models: []ModelPort{{Model: p}},
		times: make([]int64, 0, n), bytes: [][]int32{make([]int32, 0, n)}}
	now := int64(0)
	if a := testing.AllocsPerRun(200, func() { now += 1000; m.tick(now) }); a != 0 {
		t.Errorf("sampler tick: %v allocations", a)
	}
	if len(m.times) != 0 {
		t.Fatalf("%d samples before time zero was set", len(m.times))
	}
	m.tick(now) // t0 still unset: nothing
	m.t0 = now
	m.tick(now + 2500) // late: slots 0, 1 and 2 are due
	if len(m.times) != 3 || m.times[2] != 2000 || m.late != 2500 {
		t.Fatalf("times %v, late %d; want [0 1000 2000], 2500", m.times, m.late)
	}
	if a := testing.AllocsPerRun(200, func() { now += 1000; m.tick(now) }); a != 0 {
		t.Errorf("sampler tick: %v allocations", a)
	}
	b := burstLoss{on: true, gap: 10_000, burst: 1_000, rng: 3}
	lost, t0 := 0, int64(0)
	if a := testing.AllocsPerRun(10_000, func() {
		t0 += 100
		if b.lose(t0) {
			lost++
		}
	}); a != 0 {
		t.Errorf("flaky loss: %v allocations", a)
	}
	// Bursts of mean 1 us every 10 us: about 1/11 of the time is lost.
	if f := float64(lost) / 10_001; f < 0.05 || f > 0.14 {
		t.Errorf("lost fraction %.3f, want about 0.09", f)
	}
}
