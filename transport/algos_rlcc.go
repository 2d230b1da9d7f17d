package transport

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/rlcc"
)

func init() {
	registerCC(CCRegistration{
		Name: "rlcc",
		Prepare: func(cfg *Config) (func() cc.Controller, error) {
			p, err := rlcc.NewParams(cfg.RLCC, cfg.Network())
			if err != nil {
				return nil, err
			}
			return func() cc.Controller { return rlcc.New(p) }, nil
		},
		Cost: costOf,
	})
}
