package sim

import (
	"strings"
	"testing"
)

// Scenario files are decoded as the daemon's config is: every bad key named with its path
// and line, the key it most resembles suggested, sizes with the shared units.
func TestScenarioErrorsNameKeys(t *testing.T) {
	_, err := ParseScenario([]byte("topology: {kind: single, hosts: 4}\nworkload: {kind: incast, size: 64XB}\ntransport:\n  min_rtoo: 20us\n"))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range []string{"transport.min_rtoo: unknown key (line 4); did you mean min_rto?", `workload.size: "64XB" is not a size`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	if strings.Contains(err.Error(), "not found in type") {
		t.Errorf("error names a Go type: %v", err)
	}
	sc, err := ParseScenario([]byte("topology: {kind: single, hosts: 4}\nworkload: {kind: incast, size: 4k}\n"))
	if err != nil || sc.Workload.Size != 4096 {
		t.Fatalf("size 4k: %v, %+v", err, sc)
	}
}
