package netbed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Start starts cmd inside node's namespace (the child inherits the network namespace of
// the locked thread that forks it). Down, and the next Up of the same name, kill whatever
// still runs in the testbed's namespaces.
func (t *Testbed) Start(node string, cmd *exec.Cmd) error {
	if t.Plan.NodeIndex(node) < 0 {
		return fmt.Errorf("testbed %s has no node %q", t.Name, node)
	}
	return Do(t.Ns(node), cmd.Start)
}

// nsInode is the inode that identifies a named namespace (what /proc/<pid>/ns/net links to).
func nsInode(name string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(NsDir, name), &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// killIn kills every process whose network namespace is one of names and waits (up to 2 s)
// until they are gone, so the namespaces are really freed.
func killIn(names []string) error {
	inodes := map[string]bool{}
	for _, n := range names {
		if ino, err := nsInode(n); err == nil {
			inodes["net:["+strconv.FormatUint(ino, 10)+"]"] = true
		}
	}
	if len(inodes) == 0 {
		return nil
	}
	self := os.Getpid()
	var pids []int
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if link, err := os.Readlink("/proc/" + e.Name() + "/ns/net"); err == nil && inodes[link] {
			pids = append(pids, pid)
		}
	}
	var errs []error
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill %d: %w", pid, err))
		}
	}
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		alive := 0
		for _, pid := range pids {
			if syscall.Kill(pid, 0) == nil {
				if st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && !zombie(st) {
					alive++
				}
			}
		}
		if alive == 0 {
			break
		}
	}
	return errors.Join(errs...)
}

// zombie reports whether a /proc/<pid>/stat line is of a process that has exited.
func zombie(stat []byte) bool {
	for i := len(stat) - 1; i > 0; i-- {
		if stat[i] == ')' && i+2 < len(stat) {
			return stat[i+2] == 'Z' || stat[i+2] == 'X'
		}
	}
	return false
}
