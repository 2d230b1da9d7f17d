package netbed

import (
	"testing"

	"github.com/smartt-transport/smartt/test/switchport"
	"github.com/smartt-transport/smartt/test/uswitch"
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
	var b switchport.BurstLoss
	b.Start(0, 10_000, 1_000, 3)
	t0 := int64(0)
	if a := testing.AllocsPerRun(10_000, func() { t0 += 100; b.Lost(t0) }); a != 0 {
		t.Errorf("flaky loss: %v allocations", a)
	}
}
