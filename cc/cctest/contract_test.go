package cctest

import (
	"testing"

	"github.com/smartt-transport/smartt/transport"
)

// stateBytes pins each controller's per-connection state (its hwprofile.Cost), in one
// table: a change is a change to the hardware budget and shows here; a new controller
// adds its row.
var stateBytes = map[string]int{
	"bbr": 44, "dcqcn": 32, "dctcp": 24, "eqds": 76, "fixed": 4, "fixed_rate": 0, "hpcc": 104,
	"mprdma": 4, "nscc": 56, "eqds-smartt": 116, "eqds-mprdma": 80, "rlcc": 28, "smartt": 40, "smartt-fixed": 32, "swift": 16,
}

// TestEveryControllerHonoursContract runs Contract over every registered controller:
// a new registration is covered without a test of its own.
func TestEveryControllerHonoursContract(t *testing.T) {
	for _, name := range transport.CCNames() {
		t.Run(name, func(t *testing.T) {
			want, ok := stateBytes[name]
			if !ok {
				t.Fatalf("%s: no row in stateBytes", name)
			}
			Contract(t, name, want)
		})
	}
}
