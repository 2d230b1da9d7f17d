package api_test

import (
	"testing"

	"github.com/smartt-transport/smartt/transport/smarttd"
)

// Without back-pressure (api.recv_backpressure: false), where a client that releases
// nothing for write_timeout is disconnected, a trickling peer's placement still cannot
// get the victim disconnected: it is displaced first.
func TestRingHeadHeldByTricklingPeerWithoutBackpressure(t *testing.T) {
	ringHeadHeld(t, func(c *smarttd.Config) { c.API.RecvBackpressure = false })
}
