package transport

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/eqds"
	"github.com/smartt-transport/smartt/transport/seal"
	"github.com/smartt-transport/smartt/transport/wire"
)

// EQDS (cc/eqds) is an engine mode, not only a controller: its registration names the
// "eqds" credit mechanism, so every endpoint running it has a pull pacer (the receiver
// half, credit_eqds.go) and its connections send only against credit (the sender half,
// the controller itself).
// It works without trimming: a packet dropped whole gives its credit back when the
// sender judges it lost (SACK gap or timeout), at the cost of the wait.
func init() {
	registerCC(CCRegistration{Name: "eqds", Prepare: func(cfg *Config) (func() cc.Controller, error) {
		p, err := eqdsParams(cfg)
		if err != nil {
			return nil, err
		}
		return func() cc.Controller { return eqds.New(p) }, nil
	}, Credit: "eqds"})
}

// eqdsParams derives EQDS's constants; a data packet carries the DATA header, and the
// seal trailer with authentication on, beyond its payload.
func eqdsParams(cfg *Config) (*eqds.Params, error) {
	hdr := wire.DataHdrLen
	if cfg.Auth.Enabled() {
		hdr += seal.Overhead
	}
	return eqds.NewParams(cfg.EQDS, cfg.Network(), hdr)
}
