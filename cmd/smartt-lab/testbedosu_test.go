package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/test/mpifabric"
)

// testbed osu refuses an unknown controller and a bad size before building a testbed.
func TestOSURefusesBadInput(t *testing.T) {
	o := mpifabric.Options{Iters: 1, Timeout: 1e9, Name: "never"}
	for _, c := range []struct{ ccs, sizes, want string }{
		{"rlcc,bogus", "32", `cc: "bogus" is not a controller`},
		{"rlcc", "12", "multiple of 8"},
		{"rlcc", "1KB?", "sizes"},
	} {
		err := runOSU("../../test/mpifabric/osu.yaml", o, osuOpts{ccs: c.ccs, sizes: c.sizes, seeds: "1"}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("cc %q sizes %q: %v, want %q", c.ccs, c.sizes, err, c.want)
		}
	}
}
