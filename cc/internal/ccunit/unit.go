// Package ccunit holds what the controllers' unit tests share: the reference network and
// a builder of a controller's parameters from its defaults.
package ccunit

import (
	"testing"

	"github.com/smartt-transport/smartt/config"
)

// Net is the controllers' reference network (htsim's): 100 Gbit/s, a 12 us base RTT
// and a 4 KiB MTU, a BDP of 150,000 bytes.
var Net = config.Network{LinkRate: 100_000_000_000, BaseRTT: 12_000, MTU: 4096}

// Params builds parameters with build from def, each of mod applied in turn, on Net;
// an error fails t.
func Params[C, P any](t testing.TB, def C, build func(C, config.Network) (P, error), mod ...func(*C)) P {
	t.Helper()
	for _, m := range mod {
		m(&def)
	}
	p, err := build(def, Net)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
