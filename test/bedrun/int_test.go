package bedrun_test

import (
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/test/bedrun"
)

// TestMapRefusesINT: the testbed's userspace switch stamps no in-band telemetry, so a
// scenario whose controller needs it (hpcc), or that asks for INT packets, is refused
// with an error that says so; the same scenario with another controller maps.
func TestMapRefusesINT(t *testing.T) {
	const y = `
name: t
topology: {kind: single, hosts: 3, link_rate: 200Mbit}
workload: {kind: incast, senders: 2, receiver: 0, size: 64KiB}
transport: {cc: %s}
`
	for cc, want := range map[string]string{
		"hpcc":                  "the testbed's userspace switch does not",
		"fixed_rate, int: true": "stamps no in-band telemetry",
		"fixed_rate":            "",
	} {
		_, err := bedrun.Map(scenario(t, strings.Replace(y, "%s", cc, 1)))
		if (err == nil) != (want == "") || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("cc %s: %v, want %q", cc, err, want)
		}
	}
}
