package transport

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/smartt"
)

// SMaRTT is registered under two names: "smartt" (float or fixed point as
// Config.SMaRTT.FixedPoint says) and "smartt-fixed" (always the integer implementation).
func init() {
	ccByName["smartt"] = func(cfg *Config) cc.Controller { return newSMaRTT(cfg, cfg.SMaRTT.FixedPoint) }
	ccByName["smartt-fixed"] = func(cfg *Config) cc.Controller { return newSMaRTT(cfg, true) }
	ccValidators["smartt"] = validateSMaRTT
	ccValidators["smartt-fixed"] = validateSMaRTT
}

func validateSMaRTT(cfg *Config) error {
	_, err := smartt.NewParams(cfg.SMaRTT, cfg.Network(), cfg.Trimming)
	return err
}

// newSMaRTT builds one connection's controller; the config was validated, so the
// parameters derive without error. Each connection derives its own copy (a few hundred
// bytes per connection, nothing per packet).
func newSMaRTT(cfg *Config, fixed bool) cc.Controller {
	p, err := smartt.NewParams(cfg.SMaRTT, cfg.Network(), cfg.Trimming)
	if err != nil {
		panic("transport: smartt config not validated: " + err.Error())
	}
	if fixed {
		return smartt.NewFixed(p)
	}
	return smartt.NewFloat(p)
}
