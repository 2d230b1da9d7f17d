package swift_test

import (
	"testing"

	"github.com/smartt-transport/smartt/cc/cctest"
)

// TestIncastConverges: 8 senders x 8 MiB into one port, trimming on: every message
// completes within 1.5x ideal and the shares over the first half are fair (Jain >= 0.9).
func TestIncastConverges(t *testing.T) { cctest.IncastFairness(t, "swift", 0.9, nil) }
