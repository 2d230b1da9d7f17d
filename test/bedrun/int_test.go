package bedrun_test

import (
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/bedrun"
)

// TestMapINT: the testbed's emulated switches stamp INT when the controller needs it
// (hpcc) or the scenario asks for INT packets, and refuse both with queue.no_int.
func TestMapINT(t *testing.T) {
	const y = `
name: t
topology: {kind: single, hosts: 3, link_rate: 200Mbit, queue: {no_int: %v}}
workload: {kind: incast, senders: 2, receiver: 0, size: 64KiB}
transport: {cc: %s}
`
	for _, tc := range []struct {
		cc    string
		noINT bool
		int   bool
		want  string
	}{
		{"hpcc", false, true, ""},
		{"fixed_rate, int: true", false, true, ""},
		{"fixed_rate", false, false, ""},
		{"hpcc", true, false, "needs switches that stamp in-band telemetry"},
		{"fixed_rate, int: true", true, false, "the switches stamp no telemetry"},
	} {
		s := strings.Replace(strings.Replace(y, "%s", tc.cc, 1), "%v", map[bool]string{false: "false", true: "true"}[tc.noINT], 1)
		m, err := bedrun.Map(scenario(t, s))
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("cc %s, no_int %v: %v, want %q", tc.cc, tc.noINT, err, tc.want)
			continue
		}
		if err == nil && (m.Model.INT != tc.int || m.Transport.INT != tc.int) {
			t.Errorf("cc %s: switches stamp INT %v, daemons send INT %v; want %v", tc.cc, m.Model.INT, m.Transport.INT, tc.int)
		}
	}
}

// TestEmulatedHPCC: HPCC end to end on the emulated testbed: the userspace switch's
// ports stamp INT records into the daemons' DATA packets, the receiver echoes them, the
// senders' HPCC reads them, and every message of a 3:1 incast arrives intact.
func TestEmulatedHPCC(t *testing.T) {
	sc := scenario(t, `
name: hpcc3
seed: 2
topology: {kind: single, hosts: 4, link_rate: 200Mbit, queue: {bytes: 262144}}
transport: {cc: hpcc, lb: ecmp}
workload: {kind: incast, size: 1MiB, senders: 3, receiver: 3}
`)
	rep, err := bedrun.Execute(sc, bedrun.Options{Name: name(t), Timeout: 40 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Result
	var intAcks, acks uint64
	for _, h := range rep.Hosts {
		intAcks += h.INTAcks
		acks += h.AcksRecv
	}
	maxQ := 0
	for _, p := range rep.Ports {
		maxQ = max(maxQ, p.Model.MaxDataBytes)
	}
	t.Logf("%d/%d flows, completion %v; %d of %d ACKs echoed INT records; max queue %d B; %d trims",
		r.Completed, r.Flows, time.Duration(r.Completion), intAcks, acks, maxQ, r.Trims)
	if r.Completed != 3 || r.Failed != 0 {
		t.Fatalf("%d of 3 flows completed, %d failed", r.Completed, r.Failed)
	}
	if intAcks == 0 || intAcks*2 < acks {
		t.Fatalf("%d of %d ACKs carried INT records", intAcks, acks)
	}
}
