package transport

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/bbr"
)

// BBR v1 (cc/bbr).
func init() {
	registerCC(CCRegistration{Name: "bbr", Prepare: func(cfg *Config) (func() cc.Controller, error) {
		p, err := bbr.NewParams(cfg.BBR, cfg.Network())
		if err != nil {
			return nil, err
		}
		return func() cc.Controller { return bbr.New(p) }, nil
	}})
}
