package wire

import "fmt"

// MaxEVS is the size of the entropy-value space: a header's EV is 16 bits, so an
// endpoint uses EVs 0..MaxEVS-1 at most.
const MaxEVS = 1 << 16

// CheckEVS is the one range check of an EV count (transport.evs and what it feeds: the
// engine, the balancers, the socket layer): 1..MaxEVS. Carriers add their own narrower
// limits (source ports, flow labels) on top.
func CheckEVS(n int) error {
	if n < 1 || n > MaxEVS {
		return fmt.Errorf("evs = %d: must be in 1..%d", n, MaxEVS)
	}
	return nil
}
