package transport

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/swift"
)

// Swift (cc/swift).
func init() {
	registerCC(CCRegistration{Name: "swift", Prepare: func(cfg *Config) (func() cc.Controller, error) {
		p, err := swift.NewParams(cfg.Swift, cfg.Network())
		if err != nil {
			return nil, err
		}
		return func() cc.Controller { return swift.New(p) }, nil
	}})
}
