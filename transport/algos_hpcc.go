package transport

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/fixedrate"
	"github.com/smartt-transport/smartt/cc/hpcc"
)

// HPCC (cc/hpcc), which needs INT switches, and the AI-training study's fixed-rate
// pacing (cc/fixedrate).
func init() {
	registerCC(CCRegistration{Name: "hpcc", Prepare: func(cfg *Config) (func() cc.Controller, error) {
		p, err := hpcc.NewParams(cfg.HPCC, cfg.Network())
		if err != nil {
			return nil, err
		}
		return func() cc.Controller { return hpcc.New(p) }, nil
	}, Needs: CCNeeds{INT: true}})
	registerCC(CCRegistration{Name: "fixed_rate", Prepare: func(cfg *Config) (func() cc.Controller, error) {
		p, err := fixedrate.NewParams(cfg.FixedRate, cfg.Network())
		if err != nil {
			return nil, err
		}
		return func() cc.Controller { return fixedrate.New(p) }, nil
	}})
}
