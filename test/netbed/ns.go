package netbed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"

	"github.com/vishvananda/netns"
)

// NsDir is where named network namespaces are bind-mounted (the same place `ip netns` uses).
const NsDir = "/var/run/netns"

// NamePrefix starts every namespace a testbed creates: "smartt-<testbed>-<node>".
const NamePrefix = "smartt-"

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9]{0,15}$`)

// CheckName reports whether name is a valid testbed name.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("testbed name %q invalid (want 1-16 of [a-z0-9], starting with a letter)", name)
	}
	return nil
}

// NsName is the namespace name of node in testbed name.
func NsName(testbed, node string) string { return NamePrefix + testbed + "-" + node }

// Namespaces lists the namespaces that belong to testbed (also those of a crashed run).
func Namespaces(testbed string) ([]string, error) {
	ents, err := os.ReadDir(NsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	pre := NamePrefix + testbed + "-"
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), pre) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// Remove kills the processes left in the namespaces of testbed and deletes the namespaces,
// and with them every veth and qdisc in them.
// It is what Down does and what Up does first, so leftovers of a crashed run go away.
func Remove(testbed string) error {
	if err := CheckName(testbed); err != nil {
		return err
	}
	names, err := Namespaces(testbed)
	if err != nil {
		return err
	}
	errs := []error{killIn(names)} // processes started in the testbed (Start) end with it
	for _, n := range names {
		if err := netns.DeleteNamed(n); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("delete namespace %s: %w", n, err))
		}
	}
	os.Remove(statePath(testbed))
	return errors.Join(errs...)
}

// newNamedNs creates a named namespace without leaving any thread of ours inside it: it
// runs on a fresh locked goroutine, which, if it cannot return to the original namespace,
// exits still locked so the runtime discards its thread.
func newNamedNs(name string) (netns.NsHandle, error) {
	type result struct {
		h   netns.NsHandle
		err error
	}
	c := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			c <- result{-1, err}
			return
		}
		defer orig.Close()
		h, err := netns.NewNamed(name)
		if err != nil {
			netns.Set(orig)
			c <- result{-1, fmt.Errorf("create namespace %s: %w", name, err)}
			return
		}
		if err := netns.Set(orig); err != nil {
			h.Close()
			c <- result{-1, fmt.Errorf("return from namespace %s: %w", name, err)}
			return
		}
		runtime.UnlockOSThread()
		c <- result{h, nil}
	}()
	r := <-c
	return r.h, r.err
}

// Do runs fn on a thread inside the named namespace. Sockets fn opens stay in that
// namespace after Do returns, so fn is where a test opens its host's sockets.
func Do(nsName string, fn func() error) error {
	h, err := netns.GetFromPath(filepath.Join(NsDir, nsName))
	if err != nil {
		return fmt.Errorf("open namespace %s: %w", nsName, err)
	}
	defer h.Close()
	return DoHandle(h, fn)
}

// DoHandle is Do with an open namespace handle.
func DoHandle(h netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// A fresh goroutine keeps the caller's thread clean; if we cannot return to the
		// original namespace, the goroutine exits locked and the runtime kills the thread.
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(h); err != nil {
			errc <- fmt.Errorf("enter namespace: %w", err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("leave namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// writeSysctls sets sysctls (keys like "net/ipv4/ip_forward") inside a namespace.
func writeSysctls(h netns.NsHandle, kv [][2]string) error {
	return DoHandle(h, func() error {
		for _, e := range kv {
			if err := os.WriteFile("/proc/sys/"+e[0], []byte(e[1]), 0o644); err != nil {
				return fmt.Errorf("sysctl %s=%s: %w", strings.ReplaceAll(e[0], "/", "."), e[1], err)
			}
		}
		return nil
	})
}
