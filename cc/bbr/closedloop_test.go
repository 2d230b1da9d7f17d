package bbr_test

import (
	"testing"

	"github.com/smartt-transport/smartt/cc/cctest"
	"github.com/smartt-transport/smartt/transport"
)

// TestIncastConverges: 8 senders x 8 MiB into one port, trimming on: every message
// completes within 1.5x ideal; the shares over the first half are only roughly fair
// (Jain >= 0.75): BBR v1 does not react to loss or ECN, and each flow's bandwidth filter
// holds a stale maximum for up to 20 rounds, as known of it.
func TestIncastConverges(t *testing.T) {
	// BBR v1 ignores loss: under incast a packet may be trimmed many times.
	cctest.IncastFairness(t, "bbr", 0.75, func(c *transport.Config) { c.MaxRetransmits = 255 })
}
