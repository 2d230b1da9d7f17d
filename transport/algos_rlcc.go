package transport

import (
	"errors"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/rlcc"
)

func init() {
	registerCC(CCRegistration{
		Name: "rlcc",
		Prepare: func(cfg *Config) (func() cc.Controller, error) {
			if cfg.RLCC.Policy == "mlp" {
				// The float64 policy network: linked by the simulator and training only.
				if rlcc.NetPolicy == nil {
					return nil, errors.New(`rlcc.policy = "mlp": the float policy network is the simulator's and training's (smartt-lab); this program runs policy: trees`)
				}
				return rlcc.NetPolicy(cfg.RLCC, cfg.Network())
			}
			p, err := rlcc.NewParams(cfg.RLCC, cfg.Network())
			if err != nil {
				return nil, err
			}
			return func() cc.Controller { return rlcc.New(p) }, nil
		},
	})
}
