//go:build linux

package nsenter

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// PrepareDir makes NsDir what `ip netns add` makes it before it mounts a namespace there:
// a mount point of its own (a bind mount of the directory onto itself) with shared
// propagation (MS_SHARED|MS_REC), so namespace mounts in it propagate to peers and a later
// `ip netns add` finds a mount point and does not bind the directory again. Binding it
// again is what hid earlier namespace mounts: `ip netns delete` and DeleteNamed then fail
// with EBUSY and the namespace leaks. If the directory is not a mount point yet but already
// holds namespace mounts (made before this convention, or by a process without it), they
// are moved into the new bind mount (move_mount), so none is hidden.
func PrepareDir() error {
	if err := os.MkdirAll(NsDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", NsDir, err)
	}
	if err := unix.Mount("", NsDir, "none", unix.MS_SHARED|unix.MS_REC, ""); err == nil {
		return nil // a mount point already: make it shared, as ip netns add does every time
	} else if !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("make %s a shared mount: %w (needs CAP_SYS_ADMIN)", NsDir, err)
	}
	// Serialise with other processes of this project on the directory's own inode (shared
	// by its bind mounts; nothing to create or clean up). iproute2 takes no lock: it only
	// ever binds a directory that is not yet a mount point, as we do.
	lock, err := os.Open(NsDir)
	if err != nil {
		return fmt.Errorf("lock %s: %w", NsDir, err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", NsDir, err)
	}
	// Another process may have done it while we waited.
	if err := unix.Mount("", NsDir, "none", unix.MS_SHARED|unix.MS_REC, ""); err == nil {
		return nil
	}
	held, err := mountsUnder(NsDir)
	if err != nil {
		return err
	}
	fds := make([]int, 0, len(held))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, p := range held {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open namespace mount %s: %w", p, err)
		}
		fds = append(fds, fd)
	}
	if err := unix.Mount(NsDir, NsDir, "none", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s onto itself: %w", NsDir, err)
	}
	var errs []error
	for i, fd := range fds {
		if err := unix.MoveMount(fd, "", unix.AT_FDCWD, held[i], unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			errs = append(errs, fmt.Errorf("move namespace mount %s into the bind of %s: %w", held[i], NsDir, err))
		}
	}
	if err := unix.Mount("", NsDir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		errs = append(errs, fmt.Errorf("make %s a shared mount: %w", NsDir, err))
	}
	return errors.Join(errs...)
}

// mountInfo is one line of /proc/self/mountinfo: mount ID, parent ID, mount point.
type mountInfo struct {
	id, parent string
	point      string
}

func readMountInfo() ([]mountInfo, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountInfo
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 {
			continue
		}
		out = append(out, mountInfo{id: fs[0], parent: fs[1], point: unescapeMount(fs[4])})
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space and so on).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountsUnder lists the distinct mount points directly inside dir.
func mountsUnder(dir string) ([]string, error) {
	mi, err := readMountInfo()
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range mi {
		if filepath.Dir(m.point) == dir && !seen[m.point] {
			seen[m.point] = true
			out = append(out, m.point)
		}
	}
	return out, nil
}

// IsMountPoint reports whether path is the mount point of some mount (per mountinfo).
func IsMountPoint(path string) (bool, error) {
	mi, err := readMountInfo()
	if err != nil {
		return false, err
	}
	for _, m := range mi {
		if m.point == path {
			return true, nil
		}
	}
	return false, nil
}

// Delete deletes the named namespace as `ip netns delete` does: it detaches the mount and
// removes the file. A name that does not exist is not an error. If the file cannot be
// removed because another mount of it remains (one hidden by a later bind of NsDir onto
// itself, made by `ip netns add` before this package followed iproute2's convention), the
// error says so and how to free it.
func Delete(name string) error {
	p := filepath.Join(NsDir, name)
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("delete namespace %s: unmount %s: %w", name, p, err)
	}
	err := os.Remove(p)
	if err == nil || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("delete namespace %s: %s is still mounted underneath a later bind mount of %s onto itself "+
			"(made by `ip netns add` while this namespace existed, before smartt followed iproute2's convention); "+
			"the namespace lives until that mount goes: reboot, or when no other named namespace is in use, "+
			"`umount --recursive %s` and delete %s again: %w", name, p, NsDir, NsDir, p, err)
	}
	return fmt.Errorf("delete namespace %s: remove %s: %w", name, p, err)
}
