package nstest

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/test/nsenter"
)

// udpEcho opens a UDP socket inside dst, sends one datagram to it from inside src and
// returns what arrived and from where.
func udpEcho(t *testing.T, src, dst *NS, from, to netip.Addr, size int) (netip.AddrPort, []byte) {
	t.Helper()
	var rx *net.UDPConn
	if err := dst.Do(func() error {
		var err error
		rx, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(to, 0)))
		return err
	}); err != nil {
		t.Fatalf("listen in %s: %v", dst.Name, err)
	}
	defer rx.Close()
	msg := bytes.Repeat([]byte("n"), size)
	if err := src.Do(func() error {
		tx, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(from, 0)), net.UDPAddrFromAddrPort(rx.LocalAddr().(*net.UDPAddr).AddrPort()))
		if err != nil {
			return err
		}
		defer tx.Close()
		_, err = tx.Write(msg)
		return err
	}); err != nil {
		t.Fatalf("send from %s: %v", src.Name, err)
	}
	rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 65536)
	n, ap, err := rx.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatalf("%v -> %v: %v", from, to, err)
	}
	if !bytes.Equal(buf[:n], msg) {
		t.Fatalf("%v -> %v: %d bytes arrived, want %d", from, to, n, size)
	}
	return ap, buf[:n]
}

func TestPair(t *testing.T) {
	tp := Pair(t)
	// 8000 bytes fit one 9000-byte frame: the MTU is in place.
	for _, c := range [][2]netip.Addr{{tp.AddrA, tp.AddrB}, {tp.Addr6A, tp.Addr6B}, {tp.AddrB, tp.AddrA}} {
		src, dst := tp.A, tp.B
		if c[0] == tp.AddrB {
			src, dst = tp.B, tp.A
		}
		ap, _ := udpEcho(t, src, dst, c[0], c[1], 8000)
		if ap.Addr() != c[0] {
			t.Errorf("source %v, want %v", ap.Addr(), c[0])
		}
	}
	l, err := tp.A.nl.LinkByName("veth0")
	if err != nil || l.Attrs().MTU != DefaultMTU {
		t.Fatalf("veth0 in A: %v, MTU %v; want %d", err, l, DefaultMTU)
	}
	// The addresses live in the namespaces, not here.
	if _, err := net.ListenUDP("udp", &net.UDPAddr{IP: tp.AddrA.AsSlice()}); err == nil {
		t.Fatalf("could bind %v outside the namespace", tp.AddrA)
	}
}

func TestRouted(t *testing.T) {
	tp := Routed(t)
	udpEcho(t, tp.A, tp.B, tp.AddrA, tp.AddrB, 8000)
	udpEcho(t, tp.B, tp.A, tp.Addr6B, tp.Addr6A, 8000)
	// A and B share no link: the path goes through R.
	if _, err := tp.A.nl.LinkByName("ra"); err == nil {
		t.Fatal("router interface ra visible in A")
	}
	out := tp.R.MustExec(t, "cat", "/proc/sys/net/ipv4/ip_forward")
	if strings.TrimSpace(string(out)) != "1" {
		t.Fatalf("ip_forward in R = %q", out)
	}
}

func TestExecRunsInside(t *testing.T) {
	ns := New(t, "exec")
	out := ns.MustExec(t, "cat", "/proc/net/dev")
	// A fresh namespace has only loopback.
	if !strings.Contains(string(out), "lo:") || strings.Count(string(out), ":") != 1 {
		t.Fatalf("/proc/net/dev inside the namespace:\n%s", out)
	}
	if _, err := ns.Exec("false"); err == nil {
		t.Fatal("Exec(false) returned no error")
	}
}

// Namespaces are gone after the test that made them, however it ended.
func TestCleanup(t *testing.T) {
	var names []string
	t.Run("skipped", func(t *testing.T) {
		tp := Routed(t)
		names = []string{tp.A.Name, tp.R.Name, tp.B.Name}
		for _, n := range names {
			if _, err := os.Stat("/run/netns/" + n); err != nil {
				t.Fatalf("namespace %s not created: %v", n, err)
			}
		}
		t.Skip("ending early must still clean up")
	})
	if len(names) != 3 {
		t.Fatal("subtest did not create the topology")
	}
	for _, n := range names {
		if _, err := os.Stat("/run/netns/" + n); !os.IsNotExist(err) {
			t.Errorf("namespace %s still there after its test: %v", n, err)
		}
	}
}

// A namespace left by a process that died before its cleanups ran (a panic in a
// goroutine) is removed by the sweep; a live process's namespace is kept.
func TestSweepStale(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid // exited and reaped: no such process (unless reused)
	if unix.Kill(dead, 0) != unix.ESRCH {
		t.Skipf("pid %d reused", dead)
	}
	stale := fmt.Sprintf("nst%d-1-leaked", dead)
	h, err := nsenter.New(stale)
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	t.Cleanup(func() { nsenter.Delete(stale) })
	live := New(t, "live")
	gone, err := SweepStale()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(gone, stale) {
		t.Errorf("swept %v, want %s among them", gone, stale)
	}
	if _, err := os.Stat("/run/netns/" + stale); !os.IsNotExist(err) {
		t.Errorf("stale namespace %s still there: %v", stale, err)
	}
	if _, err := os.Stat("/run/netns/" + live.Name); err != nil {
		t.Errorf("live namespace %s removed: %v", live.Name, err)
	}
	for _, n := range []string{"nstx-1-a", "nst-1-a", "other", "nst12"} {
		if _, ok := stalePID(n); ok {
			t.Errorf("stalePID(%q) parsed a PID", n)
		}
	}
}

// Multipath: A reaches B over every path, and R's route to B spreads flows over the paths.
func TestMultipath(t *testing.T) {
	tp := Multipath(t, 2)
	if err := tp.R.Sysctl("net/ipv4/fib_multipath_hash_policy", "1"); err != nil { // hash on ports too
		t.Fatal(err)
	}
	udpEcho(t, tp.A, tp.B, tp.AddrA, tp.AddrB, 8000)
	udpEcho(t, tp.A, tp.B, tp.Addr6A, tp.Addr6B, 8000)
	udpEcho(t, tp.B, tp.A, tp.AddrB, tp.AddrA, 100) // replies go back by path 0
	routes, err := tp.R.nl.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range routes {
		if r.Dst != nil && r.Dst.String() == "10.99.2.1/32" {
			found = len(r.MultiPath) == 2 && r.MultiPath[0].Gw.String() == "10.99.10.1" && r.MultiPath[1].Gw.String() == "10.99.11.1"
		}
	}
	if !found {
		t.Fatalf("no two-way multipath route to B in R: %v", routes)
	}
	// Many source ports: both paths carry some.
	used := map[int]bool{}
	for i := 0; i < 32 && len(used) < 2; i++ {
		before := pathTx(t, tp)
		udpEcho(t, tp.A, tp.B, tp.AddrA, tp.AddrB, 100)
		after := pathTx(t, tp)
		for k := range after {
			if after[k] > before[k] {
				used[k] = true
			}
		}
	}
	if len(used) != 2 {
		t.Fatalf("32 flows used paths %v, want both", used)
	}
}

func pathTx(t *testing.T, tp *Topo) []uint64 {
	var tx []uint64
	for _, l := range tp.Paths {
		ll, err := tp.R.nl.LinkByName(l.IfA)
		if err != nil {
			t.Fatal(err)
		}
		tx = append(tx, ll.Attrs().Statistics.TxPackets)
	}
	return tx
}

// TestSkipHelper is run by TestNonRootSkips as another user: New must skip, not fail.
func TestSkipHelper(t *testing.T) {
	if os.Getenv("NSTEST_SKIP_HELPER") != "1" {
		t.Skip("helper of TestNonRootSkips")
	}
	New(t, "nonroot")
	t.Fatal("New returned without root")
}

// A non-root run of a namespace test skips with the reason (it failed with EPERM).
func TestNonRootSkips(t *testing.T) {
	RequireRoot(t) // to run the helper as another user
	dir, err := os.MkdirTemp("", "nstest-nonroot")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755) // the other user executes the copy of this test binary in it
	bin := dir + "/nstest.test"
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^TestSkipHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "NSTEST_SKIP_HELPER=1")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- SKIP: TestSkipHelper") ||
		!strings.Contains(string(out), "nstest: needs root to create network namespaces") {
		t.Fatalf("as uid 65534: %v\n%s", err, out)
	}
}
