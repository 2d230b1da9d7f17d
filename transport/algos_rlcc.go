package transport

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/rlcc"
)

func init() {
	ccByName["rlcc"] = func(cfg *Config) cc.Controller {
		p, err := rlcc.CachedParams(cfg.RLCC, cfg.Network())
		if err != nil {
			// Unreachable: NewEndpoint's checkAlgorithms refused this configuration.
			panic("transport: rlcc: " + err.Error())
		}
		return rlcc.New(p)
	}
	ccCheck["rlcc"] = func(cfg *Config) error {
		_, err := rlcc.CachedParams(cfg.RLCC, cfg.Network())
		return err
	}
}
