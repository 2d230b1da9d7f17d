package bedrun_test

import (
	"testing"

	"github.com/smartt-transport/smartt/test/bedrun"
)

// TestMapEVRun: the testbed's daemons spray per packet as the simulator's engine does
// (reps.run auto is 1 there, a GSO send's worth on a daemon's sockets), and keep a run
// the scenario sets.
func TestMapEVRun(t *testing.T) {
	for y, want := range map[string]int{
		"transport: {lb: reps}\n":                 1,
		"transport: {lb: reps, reps: {run: 8}}\n": 8,
	} {
		sc := scenario(t, "name: t\ntopology: {kind: single, hosts: 3, link_rate: 200Mbit}\n"+
			"workload: {kind: incast, senders: 2, receiver: 0, size: 64KiB}\n"+y)
		m, err := bedrun.Map(sc)
		if err != nil {
			t.Fatal(err)
		}
		if got := int(m.Transport.REPS.Run); got != want {
			t.Errorf("%q: the daemons get reps.run %v, want %d", y, m.Transport.REPS.Run, want)
		}
	}
}
