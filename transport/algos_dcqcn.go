package transport

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/dcqcn"
)

// DCQCN (cc/dcqcn).
func init() {
	registerCC(CCRegistration{Name: "dcqcn", Prepare: func(cfg *Config) (func() cc.Controller, error) {
		p, err := dcqcn.NewParams(cfg.DCQCN, cfg.Network())
		if err != nil {
			return nil, err
		}
		return func() cc.Controller { return dcqcn.New(p) }, nil
	}, Needs: CCNeeds{ECN: true}})
}
