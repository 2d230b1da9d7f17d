package transport

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/dctcp"
)

// DCTCP and MP-RDMA's per-ACK ECN window control (cc/dctcp).
func init() {
	registerCC(CCRegistration{Name: "dctcp", Prepare: func(cfg *Config) (func() cc.Controller, error) {
		p, err := dctcp.NewParams("dctcp", cfg.DCTCP, cfg.Network())
		if err != nil {
			return nil, err
		}
		return func() cc.Controller { return dctcp.New(p) }, nil
	}, Needs: CCNeeds{ECN: true}})
	registerCC(CCRegistration{Name: "mprdma", Prepare: func(cfg *Config) (func() cc.Controller, error) {
		p, err := dctcp.NewParams("mprdma", cfg.MPRDMA, cfg.Network())
		if err != nil {
			return nil, err
		}
		return func() cc.Controller { return dctcp.NewMPRDMA(p) }, nil
	}, Needs: CCNeeds{ECN: true}})
}
