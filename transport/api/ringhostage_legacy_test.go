//go:build linux

package api_test

import (
	"testing"
	"time"

	"github.com/smartt-transport/smartt/config"

	"github.com/smartt-transport/smartt/transport/smarttd"
)

// Without back-pressure (api.recv_backpressure: false), where a client that releases
// nothing for write_timeout is disconnected, a trickling peer's placement still cannot
// get the victim disconnected: it is displaced first (after 100 ms; write_timeout is 5 s
// here, so that a loaded machine's scheduling delays of the victim's reader do not count).
// What overflows api.max_recv_queue before the displacement (100 ms of a fast honest
// peer can be more than the queue) is dropped as that mode does, with a drop notice:
// every message is delivered or counted as dropped.
func TestRingHeadHeldByTricklingPeerWithoutBackpressure(t *testing.T) {
	skipTimedInShort(t)
	ringHeadHeld(t, true, func(c *smarttd.Config) {
		c.API.RecvBackpressure, c.API.WriteTimeout = false, config.Duration(5*time.Second)
		c.API.MaxRecvQueue = 4 << 20 // small, so that the drop accounting always runs
	})
}
