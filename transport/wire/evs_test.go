package wire

import "testing"

func TestCheckEVS(t *testing.T) {
	for _, c := range []struct {
		n  int
		ok bool
	}{{-1, false}, {0, false}, {1, true}, {256, true}, {MaxEVS - 1, true}, {MaxEVS, true}, {MaxEVS + 1, false}, {1 << 20, false}} {
		if err := CheckEVS(c.n); (err == nil) != c.ok {
			t.Errorf("CheckEVS(%d) = %v, want ok %v", c.n, err, c.ok)
		}
	}
	// The EV space is exactly what the 16-bit header field holds.
	var h Header
	h.EV = MaxEVS - 1
	if int(h.EV)+1 != MaxEVS {
		t.Fatalf("MaxEVS %d does not match the EV field's width", MaxEVS)
	}
}
