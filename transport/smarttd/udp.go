package smarttd

import (
	"errors"
	"log/slog"
)

// OpenUDP opens the transport/udp socket layer on cfg.Listen.
func OpenUDP(cfg *Config, log *slog.Logger) (*SocketLayer, error) {
	return nil, errors.New("transport/udp is not available in this build yet")
}
