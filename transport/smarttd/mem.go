package smarttd

import (
	"log/slog"

	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/wire"
)

// MemSockets returns an OpenSocket that attaches daemons to the in-memory network mn
// (tests and examples that need no real network).
func MemSockets(mn *daemon.MemNet) func(cfg *Config, log *slog.Logger) (*SocketLayer, error) {
	return func(cfg *Config, log *slog.Logger) (*SocketLayer, error) {
		sl := &SocketLayer{Caps: func() any { return map[string]any{"carrier": "memory"} }}
		if n := cfg.Shards.N(); n > 1 {
			for _, s := range mn.Shards(cfg.Listen, n, wire.Shard) {
				sl.Shards = append(sl.Shards, s)
			}
			sl.Socket = sl.Shards[0]
			return sl, nil
		}
		sl.Socket = mn.Socket(cfg.Listen)
		return sl, nil
	}
}
