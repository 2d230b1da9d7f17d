package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/netbed"
)

func TestTestbedRejectsBadInput(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(spec, []byte("kind: leafspine\nleaves: 2\nspines: 2\nhosts_per_leaf: 1\nspiens: 3\n"), 0o644)
	norate := filepath.Join(t.TempDir(), "sc.yaml")
	os.WriteFile(norate, []byte("topology: {kind: single, hosts: 3}\nworkload: {kind: incast, size: 1MiB}\n"), 0o644)
	soakBad := filepath.Join(t.TempDir(), "soak.yaml")
	os.WriteFile(soakBad, []byte("soak: {duration: 1m, rate: -2}\n"), 0o644)
	fast := filepath.Join(t.TempDir(), "fast.yaml")
	os.WriteFile(fast, []byte("topology: {kind: fattree3, hosts: 16, radix: 4, link_rate: 100Mbit}\nworkload: {kind: incast, size: 1MiB}\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"up", "-spines", "0"}, "spines 0 out of range"},
		{[]string{"up", "-topo", "ring"}, `kind "ring" unknown`},
		{[]string{"up", "-rate", "fast"}, "not a rate"},
		{[]string{"up", "-spec", spec, "-spines", "2"}, "exclude each other"},
		{[]string{"up", "-spec", spec}, "spiens"},
		{[]string{"up", "-name", "Bad_Name", "-topo", "pair"}, "testbed name"},
		{[]string{"down", "extra"}, `unknown command "extra"`},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"run"}, "want exactly one scenario"},
		{[]string{"run", norate}, "topology.link_rate"},
		{[]string{"run", fast}, `topology.kind = "fattree3"`},
		{[]string{"switch", "-kmin", "0.9", "-kmax", "0.5"}, "0 <= kmin < kmax <= 1"},
		{[]string{"switch", "-trim-dscp", "64"}, "-trim-dscp 0..63"},
		{[]string{"fail", "flaky", "h0-sw0"}, "want down|up"},
		{[]string{"fail", "degrade", "fast", "h0-sw0"}, "not a rate"},
		{[]string{"fail", "-name", "nosuchrun", "down", "h0-sw0"}, "no testbed run listening"},
		{[]string{"soak", "a.yaml", "b.yaml"}, "accepts at most 1 arg"},
		{[]string{"soak", soakBad}, "soak.rate = -2"},
		{[]string{"soak", "-duration", "1s"}, "soak.restart"},
		{[]string{"soak", filepath.Join(t.TempDir(), "none.yaml")}, "no such file"},
	} {
		var out bytes.Buffer
		err := runTestbed(c.args, &out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
}

// testbedName skips the test unless root, and returns a testbed name unique to this run
// whose namespaces are removed when the test ends.
func testbedName(t *testing.T, prefix string) string {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	b := make([]byte, 4)
	rand.Read(b)
	name := prefix + hex.EncodeToString(b)
	t.Cleanup(func() { netbed.Remove(name) })
	return name
}

func TestTestbedUpStatusLinkDown(t *testing.T) {
	name := testbedName(t, "c")
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := runTestbed(append(args[:1:1], append([]string{"-name", name}, args[1:]...)...), &out); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	out := run("up", "-topo", "leafspine", "-leaves", "2", "-spines", "4", "-hosts-per-leaf", "4", "-rate", "1Gbit", "-oversub", "4")
	if !strings.Contains(out, "uplinks 250Mbit") || !strings.Contains(out, "smartt-"+name+"-spine3") {
		t.Fatalf("up printed:\n%s", out)
	}
	run("link", "leaf1-spine2", "down")
	if out := run("status"); !strings.Contains(out, "no-carrier") {
		t.Fatalf("status after link down shows no failed link:\n%s", out)
	}
	run("link", "leaf1-spine2", "up")
	run("link", "leaf1-spine2", "rate", "100Mbit")
	if out := run("status"); strings.Contains(out, "no-carrier") {
		t.Fatalf("status after link up still shows a failed link:\n%s", out)
	}
	out = run("exec", "h3", "readlink", "/proc/self/ns/net")
	if ino := nsInode(t, "smartt-"+name+"-h3"); strings.TrimSpace(out) != ino {
		t.Fatalf("exec ran in %q, h3 is %q", out, ino)
	}
	if out := run("down"); !strings.Contains(out, "14 namespaces removed") {
		t.Fatalf("down printed %q", out)
	}
	if left, _ := netbed.Namespaces(name); len(left) != 0 {
		t.Fatalf("left after down: %v", left)
	}
}

func nsInode(t *testing.T, ns string) string {
	var st syscall.Stat_t
	if err := syscall.Stat("/var/run/netns/"+ns, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("net:[%d]", st.Ino)
}

// TestTestbedRunFail: "testbed fail" makes a link of a running "testbed run" flaky; the
// run reports the losses, writes the queue samples and a pcap per link.
func TestTestbedRunFail(t *testing.T) {
	name := testbedName(t, "f")
	dir := t.TempDir()
	sc := filepath.Join(dir, "incast.yaml")
	os.WriteFile(sc, []byte(`
topology: {kind: single, hosts: 3, link_rate: 100Mbit}
transport: {cc: smartt, lb: ops}
workload: {kind: incast, size: 1MiB, receiver: 2}
output: {sample_interval: 1ms}
`), 0o644)
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		done <- runTestbed([]string{"run", "-name", name, "-out", filepath.Join(dir, "out"), "-plots", "none",
			"-pcap", filepath.Join(dir, "pcap"), "-pcap-links", "h2-sw0", sc}, &out)
	}()
	var failOut bytes.Buffer
	var err error
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		if err = runTestbed([]string{"fail", "-name", name, "flaky", "4ms", "1ms", "sw0-h2"}, &failOut); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("testbed fail: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("testbed run: %v\n%s", err, out.String())
	}
	t.Logf("%s%s", failOut.String(), out.String())
	if !strings.Contains(failOut.String(), "flaky 4ms 1ms sw0-h2") || strings.Contains(out.String(), "flaky drops 0,") {
		t.Errorf("no flaky drops after testbed fail")
	}
	for _, f := range []string{"out/queues.csv", "out/ports.csv", "pcap/h2-sw0.pcap"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() < 100 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestTestbedDownBesideIproute2: a testbed, then a namespace from `ip netns add`, then
// `smartt-lab testbed down` removes every namespace and file of the testbed and leaves the
// other namespace alone, which `ip netns delete` then removes cleanly.
func TestTestbedDownBesideIproute2(t *testing.T) {
	name := testbedName(t, "i")
	other := "smartt-iproute2-" + name // not one of the testbed's (smartt-NAME-*)
	var out bytes.Buffer
	if err := runTestbed([]string{"up", "-name", name, "-topo", "pair"}, &out); err != nil {
		t.Fatalf("up: %v\n%s", err, out.String())
	}
	ctl := filepath.Join(netbed.StateDir, "testbed-"+name+".ctl") // as a crashed run leaves it
	os.WriteFile(ctl, nil, 0o600)
	if o, err := exec.Command("ip", "netns", "add", other).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, o)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "delete", other).Run() })
	before, _ := netbed.Namespaces(name)
	if len(before) != 2 {
		t.Fatalf("namespaces of %s: %v, want 2", name, before)
	}
	out.Reset()
	if err := runTestbed([]string{"down", "-name", name}, &out); err != nil {
		t.Fatalf("down after ip netns add: %v\n%s", err, out.String())
	}
	if left, _ := netbed.Namespaces(name); len(left) != 0 {
		t.Errorf("left after down: %v", left)
	}
	for _, n := range before {
		if _, err := os.Lstat(filepath.Join(netbed.NsDir, n)); !os.IsNotExist(err) {
			t.Errorf("%s still in %s", n, netbed.NsDir)
		}
	}
	for _, f := range []string{ctl, filepath.Join(netbed.StateDir, "testbed-"+name+".yaml")} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s survived down (%v)", f, err)
		}
	}
	if o, err := exec.Command("ip", "netns", "delete", other).CombinedOutput(); err != nil {
		t.Fatalf("ip netns delete %s after down: %v: %s", other, err, o)
	}
}

// TestTestbedSweep: the sweep of the simulator, each run on a fresh emulated testbed,
// one at a time; the jobs it prints carry the testbed name.
func TestTestbedSweep(t *testing.T) {
	name := testbedName(t, "s")
	dir := t.TempDir()
	sc := filepath.Join(dir, "incast.yaml")
	os.WriteFile(sc, []byte(`
topology: {kind: single, hosts: 3, link_rate: 100Mbit}
transport: {cc: smartt, lb: ops}
workload: {kind: incast, size: 256KiB, receiver: 2}
`), 0o644)
	var out, errb bytes.Buffer
	args := []string{sc, "-name", name, "-set", "transport.lb=ops,ecmp", "-out", filepath.Join(dir, "out")}
	if err := runSweep(testbedSweep, append(args, "-plots", "none"), &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if !strings.Contains(errb.String(), "2 runs, 2 to run, 1 at once") || !strings.Contains(out.String(), "| ecmp | 1 |") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out", "sweep.csv")); err != nil || strings.Count(string(b), "\n") != 3 {
		t.Fatalf("sweep.csv: %v\n%s", err, b)
	}
	if left, _ := netbed.Namespaces(name); len(left) != 0 {
		t.Fatalf("left after the sweep: %v", left)
	}
	out.Reset()
	if err := runSweep(testbedSweep, append(args, "-print-jobs"), &out, &errb); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 2 ||
		!strings.HasPrefix(lines[1], "smartt-lab testbed sweep ") || !strings.Contains(lines[1], "-name "+name+" -job 1") {
		t.Fatalf("jobs:\n%s", out.String())
	}
	if err := runSweep(testbedSweep, []string{sc, "-out", dir, "-j", "2"}, &out, &errb); err == nil {
		t.Fatal("testbed sweep took -j: runs in real time must not share the cores")
	}
}
