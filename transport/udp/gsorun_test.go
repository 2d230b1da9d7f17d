package udp

import "testing"

// GSORun is how many datagrams fit one GSO send: 65,000 bytes and 64 segments at most,
// never below 1.
func TestGSORun(t *testing.T) {
	for size, want := range map[int]int{4208: 15, 1472: 44, 65000: 1, 65001: 1, 70000: 1, 100: 64, 1015: 64, 1016: 63, 0: 1, -5: 1} {
		if got := GSORun(size); got != want {
			t.Errorf("GSORun(%d) = %d, want %d", size, got, want)
		}
	}
}
