package transport

import (
	"testing"
	"unsafe"
)

// TestSentPktSize: one sentPkt per PSN-window slot of every sending connection (1,024 x
// 1,024 in the 1,024-host simulations), so each byte more is a MiB more.
func TestSentPktSize(t *testing.T) {
	if n := unsafe.Sizeof(sentPkt{}); n > 40 {
		t.Fatalf("sizeof(sentPkt) = %d bytes, want at most 40", n)
	}
}

// TestSentPktStateRet: the state and the return mark share a byte; setting either
// leaves the other as it was, for every combination.
func TestSentPktStateRet(t *testing.T) {
	states := []uint8{pktAcked, pktInflight, pktLost}
	rets := []uint8{0, retActed, retIgnored}
	for _, s0 := range states {
		for _, r := range rets {
			var sp sentPkt
			sp.setState(s0)
			sp.setRet(r)
			if sp.state() != s0 || sp.ret() != r {
				t.Fatalf("setState(%d), setRet(%d): state %d ret %d", s0, r, sp.state(), sp.ret())
			}
			for _, s := range states {
				sp.setState(s)
				if sp.state() != s || sp.ret() != r {
					t.Fatalf("ret %d, setState(%d): state %d ret %d", r, s, sp.state(), sp.ret())
				}
			}
			sp.setRet(0)
			if sp.ret() != 0 || sp.state() != pktLost {
				t.Fatalf("setRet(0) after state %d: state %d ret %d", pktLost, sp.state(), sp.ret())
			}
		}
	}
}
