package transport

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/nscc"
)

// NSCC, the UEC's congestion control (cc/nscc).
func init() {
	registerCC(CCRegistration{Name: "nscc", Prepare: func(cfg *Config) (func() cc.Controller, error) {
		p, err := nscc.NewParams(cfg.NSCC, cfg.Network(), cfg.Trimming)
		if err != nil {
			return nil, err
		}
		return func() cc.Controller { return nscc.New(p) }, nil
	}, Needs: CCNeeds{ECN: true}})
}
