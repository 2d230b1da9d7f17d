// Package clienttest holds what tests and benchmarks of several packages do with API
// client sessions.
package clienttest

import (
	"context"

	"github.com/smartt-transport/smartt/transport/client"
)

// Echo sends every message s receives back to its sender, from a goroutine of its own,
// until ctx ends or the session fails.
func Echo(ctx context.Context, s *client.Session) {
	go func() {
		for {
			m, err := s.Recv(ctx)
			if err != nil {
				return
			}
			_, err = s.SendAsync(m.From, m.FromEndpoint, m.Data)
			m.Release()
			if err != nil {
				return
			}
		}
	}()
}
