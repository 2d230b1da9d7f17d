package ccunit

import (
	"errors"
	"testing"

	"github.com/smartt-transport/smartt/config"
)

// TestParamsAppliesModsOnNet: every mod reaches build, in order, with Net.
func TestParamsAppliesModsOnNet(t *testing.T) {
	got := Params(t, []int{1}, func(c []int, n config.Network) (string, error) {
		if n != Net {
			return "", errors.New("not Net")
		}
		return string(rune('0' + len(c))), nil
	}, func(c *[]int) { *c = append(*c, 2) }, func(c *[]int) { *c = append(*c, 3) })
	if got != "3" {
		t.Fatalf("build saw %s mods applied, want 3", got)
	}
}
