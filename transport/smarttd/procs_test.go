package smarttd

import (
	"fmt"
	"strings"
	"testing"
)

// TestConfigProcs: procs defaults to 0 (Go's default), takes 0..MaxProcs, and a value
// beyond either end is refused naming the key.
func TestConfigProcs(t *testing.T) {
	if p := DefaultConfig().Procs; p != 0 {
		t.Fatalf("default procs %d, want 0", p)
	}
	for _, n := range []int{0, 1, MaxProcs} {
		c, err := Load([]byte(fmt.Sprintf("procs: %d\n", n)))
		if err != nil || c.Procs != n {
			t.Errorf("procs %d: %d, %v", n, c.Procs, err)
		}
	}
	for _, n := range []int{-1, MaxProcs + 1} {
		if _, err := Load([]byte(fmt.Sprintf("procs: %d\n", n))); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("procs = %d", n)) {
			t.Errorf("procs %d: error %v, want one naming procs", n, err)
		}
	}
}
