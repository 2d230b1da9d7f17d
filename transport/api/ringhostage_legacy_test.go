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
func TestRingHeadHeldByTricklingPeerWithoutBackpressure(t *testing.T) {
	skipTimedInShort(t)
	ringHeadHeld(t, func(c *smarttd.Config) {
		c.API.RecvBackpressure, c.API.WriteTimeout = false, config.Duration(5*time.Second)
	})
}
