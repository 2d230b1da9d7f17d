package transport

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/rlcc"
)

func init() {
	registerCC(CCRegistration{
		Name: "rlcc",
		Prepare: func(cfg *Config) (func() cc.Controller, error) {
			if cfg.RLCC.Policy == "mlp" {
				// The float64 policy network (simulator and training only).
				np, err := rlcc.NewNetParams(cfg.RLCC, cfg.Network(), nil)
				if err != nil {
					return nil, err
				}
				return func() cc.Controller { return rlcc.NewNet(np) }, nil
			}
			p, err := rlcc.NewParams(cfg.RLCC, cfg.Network())
			if err != nil {
				return nil, err
			}
			return func() cc.Controller { return rlcc.New(p) }, nil
		},
	})
}
