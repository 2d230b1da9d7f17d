// Package nsenter runs code inside Linux network namespaces without leaking a thread in
// the wrong namespace: a namespace belongs to an OS thread, so each call runs on a fresh
// goroutine locked to its thread, returns that thread to the original namespace, and if
// it cannot, exits still locked so the Go runtime discards the thread. Shared by the test
// namespaces (test/nstest) and the testbeds (test/netbed).
//
// Named namespaces follow iproute2's convention (see PrepareDir), so `ip netns add` and
// `ip netns delete` and this package can create and delete each other's namespaces.
package nsenter

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// New creates the named network namespace (bind-mounted at /run/netns/NAME, as `ip netns
// add` does, after PrepareDir) and returns a handle to it; no thread of the caller's is
// left inside.
func New(name string) (netns.NsHandle, error) {
	if err := PrepareDir(); err != nil {
		return -1, err
	}
	var h netns.NsHandle = -1
	err := run(func() error {
		var err error
		h, err = netns.NewNamed(name) // enters the new namespace: run brings the thread back
		if err != nil {
			return fmt.Errorf("create namespace %s: %w", name, err)
		}
		return nil
	})
	if err != nil && h >= 0 {
		h.Close()
		h = -1
	}
	return h, err
}

// Do runs fn on a thread inside namespace h. Sockets fn opens stay in that namespace
// after Do returns and may be used from any goroutine.
func Do(h netns.NsHandle, fn func() error) error {
	return run(func() error {
		if err := netns.Set(h); err != nil {
			return fmt.Errorf("enter namespace: %w", err)
		}
		return fn()
	})
}

// run calls fn on a fresh locked thread and returns the thread to the namespace it
// started in.
func run(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("leave namespace: %w", err))
			return // still locked: the thread dies with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// NsDir is where named network namespaces are bind-mounted: iproute2's NETNS_RUN_DIR
// (/var/run/netns, a symlink to /run/netns on current systems) and vishvananda/netns's path.
const NsDir = "/run/netns"
