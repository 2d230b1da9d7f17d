//go:build linux

package nsenter

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

const childEnv = "SMARTT_NSENTER_MOUNTNS_CHILD"

// TestCoexistsWithIproute2 runs in a child process with a private mount namespace (so
// resetting /run/netns to its state before any `ip netns add` touches nothing of the
// host's): first the bug (a namespace mounted without iproute2's convention is hidden by a
// later `ip netns add` and cannot be deleted), then the fix (PrepareDir: a namespace made
// by New, one made the old way before it and one made by `ip netns add` after it are all
// deleted cleanly, each by the other tool).
func TestCoexistsWithIproute2(t *testing.T) {
	prefix := os.Getenv(childEnv)
	if prefix == "" {
		if os.Geteuid() != 0 {
			t.Fatal("needs root (CAP_SYS_ADMIN) for network and mount namespaces")
		}
		if _, err := exec.LookPath("ip"); err != nil {
			t.Fatalf("ip (iproute2) not installed: apt-get install -y iproute2: %v", err)
		}
		prefix = fmt.Sprintf("smartt-nsx%d", os.Getpid())
		t.Cleanup(func() { // files a failed child may leave on disk (their mounts died with it)
			left, _ := filepath.Glob(filepath.Join(NsDir, prefix+"-*"))
			for _, p := range left {
				if err := Delete(filepath.Base(p)); err != nil {
					t.Errorf("cleanup: %v", err)
				}
			}
		})
		cmd := exec.Command(os.Args[0], "-test.run=^TestCoexistsWithIproute2$", "-test.v")
		cmd.Env = append(os.Environ(), childEnv+"="+prefix)
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS} // Go makes / private in it
		out, err := cmd.CombinedOutput()
		t.Logf("child (own mount namespace):\n%s", out)
		if err != nil {
			t.Fatalf("child: %v", err)
		}
		if !strings.Contains(string(out), "--- PASS: TestCoexistsWithIproute2") {
			t.Fatal("child did not run the test")
		}
		left, _ := filepath.Glob(filepath.Join(NsDir, prefix+"-*"))
		for _, p := range left {
			if !strings.HasSuffix(p, "-bug") && !strings.HasSuffix(p, "-bug-ip") {
				t.Errorf("%s left behind by the fixed path", p)
			}
		}
		return
	}

	ip := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %v: %w: %s", args, err, out)
		}
		return nil
	}
	// reset makes /run/netns a plain directory again (in this mount namespace only).
	reset := func() {
		for i := 0; i < 8; i++ {
			if mp, err := IsMountPoint(NsDir); err != nil || !mp {
				return
			}
			if err := unix.Unmount(NsDir, unix.MNT_DETACH); err != nil {
				t.Fatalf("reset: unmount %s: %v", NsDir, err)
			}
		}
		t.Fatalf("reset: %s still a mount point", NsDir)
	}
	oldWay := func(name string) { // what nsenter.New did before: netns.NewNamed without PrepareDir
		t.Helper()
		if err := run(func() error {
			h, err := netns.NewNamed(name)
			if err == nil {
				h.Close()
			}
			return err
		}); err != nil {
			t.Fatalf("netns.NewNamed %s: %v", name, err)
		}
	}
	gone := func(name string) {
		t.Helper()
		p := filepath.Join(NsDir, name)
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s still exists (%v)", p, err)
		}
		if mp, _ := IsMountPoint(p); mp {
			t.Errorf("%s still mounted", p)
		}
	}

	// The bug, as a control: without the convention, `ip netns add` hides the mount.
	reset()
	bug, bugIP := prefix+"-bug", prefix+"-bug-ip"
	oldWay(bug)
	if err := ip("netns", "add", bugIP); err != nil {
		t.Fatal(err)
	}
	if err := ip("netns", "delete", bug); err == nil {
		t.Fatalf("control: ip netns delete %s succeeded; the hidden-mount bug did not reproduce, so this test proves nothing", bug)
	}
	if err := Delete(bug); err == nil || !strings.Contains(err.Error(), "still mounted underneath") {
		t.Fatalf("control: Delete(%s) = %v; want the hidden-mount explanation", bug, err)
	} else {
		t.Logf("control, as expected: %v", err)
	}
	ip("netns", "delete", bugIP)

	// The fix.
	reset()
	pre, ours, theirs, ours2 := prefix+"-pre", prefix+"-ours", prefix+"-ip", prefix+"-ours2"
	t.Cleanup(func() {
		for _, n := range []string{pre, ours, theirs, ours2} {
			Delete(n)
		}
	})
	oldWay(pre) // made before the convention: must not be hidden by PrepareDir
	h, err := New(ours)
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	if mp, _ := IsMountPoint(NsDir); !mp {
		t.Fatalf("%s is not a mount point after New", NsDir)
	}
	if err := ip("netns", "add", theirs); err != nil {
		t.Fatal(err)
	}
	h2, err := New(ours2) // with the directory already a mount point
	if err != nil {
		t.Fatal(err)
	}
	h2.Close()
	for _, n := range []string{pre, ours, theirs, ours2} { // all usable through iproute2
		if err := ip("netns", "exec", n, "true"); err != nil {
			t.Errorf("namespace %s after ip netns add: %v", n, err)
		}
	}
	if err := ip("netns", "delete", ours); err != nil { // iproute2 deletes ours
		t.Errorf("ip netns delete %s: %v", ours, err)
	}
	if err := ip("netns", "delete", pre); err != nil {
		t.Errorf("ip netns delete %s: %v", pre, err)
	}
	for _, n := range []string{theirs, ours2} { // we delete iproute2's and ours
		if err := Delete(n); err != nil {
			t.Errorf("Delete(%s): %v", n, err)
		}
	}
	for _, n := range []string{pre, ours, theirs, ours2} {
		gone(n)
	}
}
