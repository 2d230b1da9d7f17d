package transport

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/smartt"
)

// SMaRTT is registered under two names: "smartt" (float or fixed point as
// Config.SMaRTT.FixedPoint says) and "smartt-fixed" (always the integer implementation).
func init() {
	registerCC(CCRegistration{Name: "smartt", Prepare: func(cfg *Config) (func() cc.Controller, error) {
		return prepareSMaRTT(cfg, cfg.SMaRTT.FixedPoint)
	}, Needs: CCNeeds{ECN: true}})
	registerCC(CCRegistration{Name: "smartt-fixed", Prepare: func(cfg *Config) (func() cc.Controller, error) {
		return prepareSMaRTT(cfg, true)
	}, Needs: CCNeeds{ECN: true}})
}

// prepareSMaRTT derives the parameters once per endpoint; every connection shares them.
func prepareSMaRTT(cfg *Config, fixed bool) (func() cc.Controller, error) {
	p, err := smartt.NewParams(cfg.SMaRTT, cfg.Network(), cfg.Trimming)
	if err != nil {
		return nil, err
	}
	if fixed {
		return func() cc.Controller { return smartt.NewFixed(p) }, nil
	}
	return func() cc.Controller { return smartt.NewFloat(p) }, nil
}
