package smarttd

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"time"
)

// LocalPair starts two daemons in this process on 127.0.0.1 and 127.0.0.2 (no root, no
// setup: all of 127/8 is loopback on Linux) with the embedded default config, API sockets
// in dir and free UDP ports picked at random. mod, if set, adjusts each config.
func LocalPair(dir string, o Options, mod func(*Config)) ([2]*Daemon, error) {
	var ds [2]*Daemon
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		port := uint16(20000 + rand.IntN(40000))
		for i := range ds {
			cfg := DefaultConfig()
			cfg.Listen = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 1)}), port)
			cfg.API.Socket = filepath.Join(dir, fmt.Sprintf("smarttd%d.sock", i+1))
			cfg.Metrics = ""
			if mod != nil {
				mod(&cfg)
			}
			ds[i], err = Start(cfg, o)
			if err != nil {
				break
			}
		}
		if err == nil {
			return ds, nil
		}
		StopAll(ds[:], time.Second)
		ds = [2]*Daemon{}
	}
	return ds, fmt.Errorf("starting two daemons on 127.0.0.1 and 127.0.0.2: %w", err)
}

// StopAll shuts the daemons down concurrently within timeout (nil entries are skipped).
func StopAll(ds []*Daemon, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	errs := make(chan error, len(ds))
	n := 0
	for _, d := range ds {
		if d != nil {
			n++
			go func() { errs <- d.Shutdown(ctx) }()
		}
	}
	var all []error
	for i := 0; i < n; i++ {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}
