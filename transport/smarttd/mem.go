package smarttd

import (
	"log/slog"

	"github.com/smartt-transport/smartt/transport/daemon"
)

// MemSockets returns an OpenSocket that attaches daemons to the in-memory network mn
// (tests and examples that need no real network).
func MemSockets(mn *daemon.MemNet) func(cfg *Config, log *slog.Logger) (*SocketLayer, error) {
	return func(cfg *Config, log *slog.Logger) (*SocketLayer, error) {
		return &SocketLayer{Socket: mn.Socket(cfg.Listen),
			Caps: func() any { return map[string]any{"carrier": "memory"} }}, nil
	}
}
