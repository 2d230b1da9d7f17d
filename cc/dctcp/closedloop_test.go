package dctcp_test

import (
	"testing"

	"github.com/smartt-transport/smartt/cc/cctest"
)

// TestIncastConverges: 8 senders, 8 MiB each, into one port with ECN marking (and
// trimming): every message completes within 1.5x ideal and the senders' shares over the
// first half of the incast are fair (Jain >= 0.9).
func TestIncastConverges(t *testing.T) {
	for _, name := range []string{"dctcp", "mprdma"} {
		t.Run(name, func(t *testing.T) { cctest.IncastFairness(t, name, 0.9, nil) })
	}
}
