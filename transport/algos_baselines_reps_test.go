package transport

import (
	"slices"
	"testing"
)

// The REPS paper's MPRDMA and BitMap baselines are registered under the names its
// figures' scripts use.
func TestREPSPaperBaselinesRegistered(t *testing.T) {
	for _, name := range []string{"mprdma", "bitmap"} {
		if !slices.Contains(LBNames(), name) {
			t.Errorf("lb %q not registered (have %v)", name, LBNames())
		}
		cfg := DefaultConfig()
		cfg.LB = name
		if err := cfg.Validate(); err != nil {
			t.Errorf("lb %q: %v", name, err)
		}
	}
}
