package netbed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/vishvananda/netns"

	"github.com/smartt-transport/smartt/test/nsenter"
)

// NsDir is where named network namespaces are bind-mounted (the same place `ip netns` uses).
const NsDir = nsenter.NsDir

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

// Remove kills the processes left in the namespaces of testbed, deletes the namespaces (and
// with them every veth and qdisc in them) the way `ip netns delete` does, and removes the
// testbed's files in StateDir (its spec, a run's control socket). It is what Down does and
// what Up does first, so leftovers of a crashed run go away.
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
		if err := nsenter.Delete(n); err != nil {
			errs = append(errs, err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(StateDir, "testbed-"+testbed+".*")) // .yaml, .ctl
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", f, err))
		}
	}
	return errors.Join(errs...)
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
func DoHandle(h netns.NsHandle, fn func() error) error { return nsenter.Do(h, fn) }

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
