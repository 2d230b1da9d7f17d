// Package nstest builds throwaway Linux network namespaces for tests: named namespaces
// with a per-run unique prefix, veth links between them (MTU 9000 by default), an optional
// router namespace with forwarding on, and Do to run code inside a namespace. Everything
// is built over netlink (no shelling out to ip) and removed by t.Cleanup, also when the
// test fails. It needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN); without it the tests that
// use it are skipped, saying why.
package nstest

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/test/nsenter"
)

// DefaultMTU is the MTU of veth links unless LinkOpts says otherwise.
const DefaultMTU = 9000

var seq atomic.Uint64

// prefix makes namespace names unique per process run.
var prefix = fmt.Sprintf("nst%d", os.Getpid())

// sweepOnce removes, before a process makes its first namespace, those left behind by
// earlier test processes that died before their cleanups ran (a panic in a goroutine ends
// the process without t.Cleanup).
var sweepOnce sync.Once

// SweepStale deletes the namespaces in /run/netns named nstPID-... whose process PID no
// longer exists, and returns their names. New calls it once per process.
func SweepStale() ([]string, error) {
	ents, err := os.ReadDir("/run/netns")
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var gone []string
	var first error
	for _, e := range ents {
		pid, ok := stalePID(e.Name())
		if !ok || pid == os.Getpid() || unix.Kill(pid, 0) != unix.ESRCH {
			continue
		}
		if err := nsenter.Delete(e.Name()); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		gone = append(gone, e.Name())
	}
	return gone, first
}

// stalePID parses the PID of a name made by New ("nst" PID "-" seq "-" name).
func stalePID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "nst")
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(digits)
	return pid, err == nil && pid > 0
}

// NS is a named network namespace.
type NS struct {
	Name string
	h    netns.NsHandle
	nl   *netlink.Handle
}

// RequireRoot skips the test unless it runs as root: creating network namespaces needs
// CAP_SYS_ADMIN and CAP_NET_ADMIN. New calls it, so a non-root `go test ./...` skips the
// namespace tests with this reason instead of failing them.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("nstest: needs root to create network namespaces (CAP_SYS_ADMIN, CAP_NET_ADMIN); " +
			"run as root, e.g. sudo ./scripts/test (README, \"Tests\")")
	}
}

// New creates a namespace named after name (plus a unique prefix) with loopback up; it is
// deleted when the test ends. Without root the test is skipped (RequireRoot).
func New(t testing.TB, name string) *NS {
	t.Helper()
	RequireRoot(t)
	sweepOnce.Do(func() {
		if gone, err := SweepStale(); err != nil {
			t.Logf("nstest: removing stale namespaces: %v", err)
		} else if len(gone) > 0 {
			t.Logf("nstest: removed %d namespaces of dead test processes: %v", len(gone), gone)
		}
	})
	full := fmt.Sprintf("%s-%d-%s", prefix, seq.Add(1), name)
	h, err := nsenter.New(full)
	if err != nil {
		t.Fatalf("nstest: create namespace %s: %v", full, err)
	}
	ns := &NS{Name: full, h: h}
	t.Cleanup(func() { ns.remove(t) })
	ns.nl, err = netlink.NewHandleAt(h)
	if err != nil {
		t.Fatalf("nstest: netlink handle in %s: %v", full, err)
	}
	// No duplicate-address detection: link-local addresses (used by neighbour discovery
	// and by the router) are usable at once instead of seconds later.
	for _, k := range []string{"net/ipv6/conf/all/accept_dad", "net/ipv6/conf/default/accept_dad"} {
		if err := ns.Sysctl(k, "0"); err != nil {
			t.Fatalf("nstest: sysctl %s=0 in %s: %v", k, full, err)
		}
	}
	lo, err := ns.nl.LinkByName("lo")
	if err == nil {
		err = ns.nl.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatalf("nstest: loopback up in %s: %v", full, err)
	}
	return ns
}

func (ns *NS) remove(t testing.TB) {
	if ns.nl != nil {
		ns.nl.Close()
	}
	ns.h.Close()
	if err := nsenter.Delete(ns.Name); err != nil {
		t.Errorf("nstest: %v", err)
	}
}

// Do runs f on an OS thread inside the namespace. Sockets f creates belong to the
// namespace and may be used from any goroutine afterwards.
func (ns *NS) Do(f func() error) error {
	return nsenter.Do(ns.h, f)
}

// Interface returns the namespace's network interface name, failing t if it has none.
func (ns *NS) Interface(t testing.TB, name string) *net.Interface {
	t.Helper()
	var l *net.Interface
	if err := ns.Do(func() error {
		var err error
		l, err = net.InterfaceByName(name)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return l
}

// Open runs open on a thread inside ns, so the sockets it makes belong to ns, fails the
// test on error, and closes what it opened when the test ends.
func Open[T io.Closer](t testing.TB, ns *NS, open func() (T, error)) T {
	t.Helper()
	var v T
	if err := ns.Do(func() error {
		var err error
		v, err = open()
		return err
	}); err != nil {
		t.Fatalf("open in %s: %v", ns.Name, err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// Exec runs a command inside the namespace and returns its combined output.
func (ns *NS) Exec(name string, args ...string) ([]byte, error) {
	var out []byte
	err := ns.Do(func() error {
		var err error
		out, err = exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %v in %s: %w: %s", name, args, ns.Name, err, out)
		}
		return nil
	})
	return out, err
}

// MustExec is Exec that fails the test on error.
func (ns *NS) MustExec(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	out, err := ns.Exec(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Sysctl writes a sysctl of the namespace, e.g. Sysctl("net/ipv4/ip_forward", "1").
func (ns *NS) Sysctl(key, value string) error {
	return ns.Do(func() error {
		return os.WriteFile("/proc/sys/"+key, []byte(value), 0)
	})
}

// LinkOpts describes one veth link; zero fields get defaults.
type LinkOpts struct {
	MTU      int          // DefaultMTU if 0
	IfA, IfB string       // interface names (veth0/veth1 if empty)
	A, B     netip.Prefix // IPv4 address/prefix of each end (none if invalid)
	A6, B6   netip.Prefix // IPv6 address/prefix of each end (none if invalid)
}

// Link is a veth pair between two namespaces.
type Link struct {
	A, B     *NS
	IfA, IfB string
	MTU      int
}

// Connect joins a and b with a veth pair, addresses both ends and brings them up.
func Connect(t testing.TB, a, b *NS, o LinkOpts) *Link {
	t.Helper()
	if o.MTU == 0 {
		o.MTU = DefaultMTU
	}
	if o.IfA == "" {
		o.IfA = "veth0"
	}
	if o.IfB == "" {
		o.IfB = "veth1"
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: o.IfA, MTU: o.MTU},
		PeerName:      o.IfB,
		PeerNamespace: netlink.NsFd(b.h),
		PeerMTU:       uint32(o.MTU),
	}
	if err := a.nl.LinkAdd(veth); err != nil {
		t.Fatalf("nstest: veth %s/%s between %s and %s: %v", o.IfA, o.IfB, a.Name, b.Name, err)
	}
	setup(t, a, o.IfA, o.A, o.A6)
	setup(t, b, o.IfB, o.B, o.B6)
	waitUp(t, a, o.IfA)
	waitUp(t, b, o.IfB)
	return &Link{A: a, B: b, IfA: o.IfA, IfB: o.IfB, MTU: o.MTU}
}

func setup(t testing.TB, ns *NS, ifname string, p4, p6 netip.Prefix) {
	t.Helper()
	l, err := ns.nl.LinkByName(ifname)
	if err != nil {
		t.Fatalf("nstest: %s in %s: %v", ifname, ns.Name, err)
	}
	for _, p := range []netip.Prefix{p4, p6} {
		if !p.IsValid() {
			continue
		}
		addr, err := netlink.ParseAddr(p.String())
		if err != nil {
			t.Fatalf("nstest: address %v: %v", p, err)
		}
		addr.Flags = ifaNoDAD // usable at once, no duplicate-address detection delay
		if err := ns.nl.AddrAdd(l, addr); err != nil {
			t.Fatalf("nstest: add %v to %s in %s: %v", p, ifname, ns.Name, err)
		}
	}
	if err := ns.nl.LinkSetUp(l); err != nil {
		t.Fatalf("nstest: %s up in %s: %v", ifname, ns.Name, err)
	}
}

// waitUp waits until the kernel's link watcher has marked the link operationally up;
// before that its qdisc drops everything, so a test's first packets (and the first ARP or
// neighbour solicitation, retried only after a second) would be lost.
func waitUp(t testing.TB, ns *NS, ifname string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := ns.nl.LinkByName(ifname)
		if err != nil {
			t.Fatalf("nstest: %s in %s: %v", ifname, ns.Name, err)
		}
		if l.Attrs().OperState == netlink.OperUp {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nstest: %s in %s not up after 5 s (state %v)", ifname, ns.Name, l.Attrs().OperState)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Route adds a route in the namespace: dst via gw (both of one family).
func (ns *NS) Route(t testing.TB, dst netip.Prefix, gw netip.Addr) {
	t.Helper()
	_, ipnet, err := netParseCIDR(dst)
	if err != nil {
		t.Fatalf("nstest: route %v: %v", dst, err)
	}
	if err := ns.nl.RouteAdd(&netlink.Route{Dst: ipnet, Gw: gw.AsSlice()}); err != nil {
		t.Fatalf("nstest: route %v via %v in %s: %v", dst, gw, ns.Name, err)
	}
}

// Topo is two hosts A and B, joined directly (Pair), through a router R (Routed), or
// through R over several equal-cost paths (Multipath).
type Topo struct {
	A, B, R        *NS
	AddrA, AddrB   netip.Addr // IPv4 addresses of A and B
	Addr6A, Addr6B netip.Addr // IPv6 addresses of A and B
	AB             *Link      // Pair: the A-B link
	AR, RB         *Link      // Routed: A-R and R-B links; R's interfaces are "ra" and "rb"
	Paths          []*Link    // Multipath: the parallel R-B links; R's interfaces are "rb0", "rb1", ...
}

// Pair makes namespaces A and B joined by one veth pair of MTU 9000:
// A 10.99.0.1/24 fd99::1/64, B 10.99.0.2/24 fd99::2/64.
func Pair(t testing.TB) *Topo {
	t.Helper()
	tp := &Topo{A: New(t, "a"), B: New(t, "b"),
		AddrA: netip.MustParseAddr("10.99.0.1"), AddrB: netip.MustParseAddr("10.99.0.2"),
		Addr6A: netip.MustParseAddr("fd99::1"), Addr6B: netip.MustParseAddr("fd99::2")}
	tp.AB = Connect(t, tp.A, tp.B, LinkOpts{IfA: "veth0", IfB: "veth0",
		A: netip.PrefixFrom(tp.AddrA, 24), B: netip.PrefixFrom(tp.AddrB, 24),
		A6: netip.PrefixFrom(tp.Addr6A, 64), B6: netip.PrefixFrom(tp.Addr6B, 64)})
	return tp
}

// Routed makes hosts A and B in different subnets with router namespace R between them
// (forwarding on for both families), every link MTU 9000:
// A 10.99.1.1/24 fd99:1::1/64 -- R 10.99.1.254 fd99:1::fe | 10.99.2.254 fd99:2::fe -- B 10.99.2.1/24 fd99:2::1/64.
func Routed(t testing.TB) *Topo {
	t.Helper()
	tp, ra, ra6 := routedHosts(t)
	rb, rb6 := netip.MustParseAddr("10.99.2.254"), netip.MustParseAddr("fd99:2::fe")
	linkAToR(t, tp, ra, ra6)
	tp.RB = Connect(t, tp.R, tp.B, LinkOpts{IfA: "rb", IfB: "veth0",
		A: netip.PrefixFrom(rb, 24), B: netip.PrefixFrom(tp.AddrB, 24),
		A6: netip.PrefixFrom(rb6, 64), B6: netip.PrefixFrom(tp.Addr6B, 64)})
	tp.A.Route(t, netip.MustParsePrefix("0.0.0.0/0"), ra)
	tp.A.Route(t, netip.MustParsePrefix("::/0"), ra6)
	tp.B.Route(t, netip.MustParsePrefix("0.0.0.0/0"), rb)
	tp.B.Route(t, netip.MustParsePrefix("::/0"), rb6)
	return tp
}

// routedHosts makes the namespaces A, R and B of Routed and Multipath, with A's and B's
// addresses; ra and ra6 are R's addresses on A's subnet.
func routedHosts(t testing.TB) (tp *Topo, ra, ra6 netip.Addr) {
	tp = &Topo{A: New(t, "a"), R: New(t, "r"), B: New(t, "b"),
		AddrA: netip.MustParseAddr("10.99.1.1"), AddrB: netip.MustParseAddr("10.99.2.1"),
		Addr6A: netip.MustParseAddr("fd99:1::1"), Addr6B: netip.MustParseAddr("fd99:2::1")}
	return tp, netip.MustParseAddr("10.99.1.254"), netip.MustParseAddr("fd99:1::fe")
}

// linkAToR turns forwarding on in R (both families) and joins A's veth0 to R's ra, R at
// ra and ra6.
func linkAToR(t testing.TB, tp *Topo, ra, ra6 netip.Addr) {
	for _, kv := range [][2]string{{"net/ipv4/ip_forward", "1"}, {"net/ipv6/conf/all/forwarding", "1"}} {
		if err := tp.R.Sysctl(kv[0], kv[1]); err != nil {
			t.Fatalf("nstest: sysctl %s=%s in %s: %v", kv[0], kv[1], tp.R.Name, err)
		}
	}
	tp.AR = Connect(t, tp.A, tp.R, LinkOpts{IfA: "veth0", IfB: "ra",
		A: netip.PrefixFrom(tp.AddrA, 24), B: netip.PrefixFrom(ra, 24),
		A6: netip.PrefixFrom(tp.Addr6A, 64), B6: netip.PrefixFrom(ra6, 64)})
}

func netParseCIDR(p netip.Prefix) (net.IP, *net.IPNet, error) {
	return net.ParseCIDR(p.Masked().String())
}

// Multipath makes hosts A and B with router R between them and n parallel links from R to
// B (every link MTU 9000). B's addresses 10.99.2.1 and fd99:2::1 sit on its loopback; R
// reaches them by one equal-cost multipath route over all n links, so R's hash of each
// packet's headers picks its path (set net/ipv4/fib_multipath_hash_policy and
// net/ipv6/fib_multipath_hash_policy in R to choose the fields). Path k is R "rbk"
// 10.99.(10+k).254 fd99:(10+k)::fe -- B "vethk" 10.99.(10+k).1 fd99:(10+k)::1. A is
// 10.99.1.1 fd99:1::1 behind R's "ra"; reverse-path filtering is off in R and B, since
// B's replies all leave by path 0.
func Multipath(t testing.TB, n int) *Topo {
	t.Helper()
	if n < 1 || n > 16 {
		t.Fatalf("nstest: Multipath with %d paths: allowed 1..16", n)
	}
	tp, ra, ra6 := routedHosts(t)
	for _, ns := range []*NS{tp.R, tp.B} {
		for _, kv := range [][2]string{{"net/ipv4/conf/all/rp_filter", "0"}, {"net/ipv4/conf/default/rp_filter", "0"}} {
			if err := ns.Sysctl(kv[0], kv[1]); err != nil {
				t.Fatalf("nstest: sysctl %s=%s in %s: %v", kv[0], kv[1], ns.Name, err)
			}
		}
	}
	linkAToR(t, tp, ra, ra6)
	lo, err := tp.B.nl.LinkByName("lo")
	if err != nil {
		t.Fatalf("nstest: lo in %s: %v", tp.B.Name, err)
	}
	for _, p := range []netip.Prefix{netip.PrefixFrom(tp.AddrB, 32), netip.PrefixFrom(tp.Addr6B, 128)} {
		a, _ := netlink.ParseAddr(p.String())
		a.Flags = ifaNoDAD
		if err := tp.B.nl.AddrAdd(lo, a); err != nil {
			t.Fatalf("nstest: add %v to lo in %s: %v", p, tp.B.Name, err)
		}
	}
	var hops4, hops6 []*netlink.NexthopInfo
	for k := 0; k < n; k++ {
		r4 := netip.AddrFrom4([4]byte{10, 99, byte(10 + k), 254})
		b4 := netip.AddrFrom4([4]byte{10, 99, byte(10 + k), 1})
		r6 := netip.MustParseAddr(fmt.Sprintf("fd99:%x::fe", 0x10+k))
		b6 := netip.MustParseAddr(fmt.Sprintf("fd99:%x::1", 0x10+k))
		l := Connect(t, tp.R, tp.B, LinkOpts{IfA: fmt.Sprintf("rb%d", k), IfB: fmt.Sprintf("veth%d", k),
			A: netip.PrefixFrom(r4, 24), B: netip.PrefixFrom(b4, 24), A6: netip.PrefixFrom(r6, 64), B6: netip.PrefixFrom(b6, 64)})
		tp.Paths = append(tp.Paths, l)
		rl, err := tp.R.nl.LinkByName(l.IfA)
		if err != nil {
			t.Fatalf("nstest: %s in %s: %v", l.IfA, tp.R.Name, err)
		}
		hops4 = append(hops4, &netlink.NexthopInfo{LinkIndex: rl.Attrs().Index, Gw: b4.AsSlice()})
		hops6 = append(hops6, &netlink.NexthopInfo{LinkIndex: rl.Attrs().Index, Gw: b6.AsSlice()})
		if k == 0 {
			tp.B.Route(t, netip.MustParsePrefix("0.0.0.0/0"), r4)
			tp.B.Route(t, netip.MustParsePrefix("::/0"), r6)
		}
	}
	for _, r := range []struct {
		dst  netip.Prefix
		hops []*netlink.NexthopInfo
	}{{netip.PrefixFrom(tp.AddrB, 32), hops4}, {netip.PrefixFrom(tp.Addr6B, 128), hops6}} {
		_, ipnet, _ := netParseCIDR(r.dst)
		if err := tp.R.nl.RouteAdd(&netlink.Route{Dst: ipnet, MultiPath: r.hops}); err != nil {
			t.Fatalf("nstest: multipath route to %v in %s: %v", r.dst, tp.R.Name, err)
		}
	}
	tp.A.Route(t, netip.MustParsePrefix("0.0.0.0/0"), ra)
	tp.A.Route(t, netip.MustParsePrefix("::/0"), ra6)
	return tp
}

// SNMP reads the namespace's IP counters: /proc/net/snmp as "Proto.Field" (e.g.
// "Ip.FragCreates", "Ip.FragFails", "Udp.OutDatagrams") and /proc/net/snmp6 under its own
// names (e.g. "Ip6FragCreates"); it fails the test if it cannot.
func (ns *NS) SNMP(t testing.TB) map[string]uint64 {
	t.Helper()
	var b4, b6 []byte
	err := ns.Do(func() error {
		var err error
		// thread-self: this thread's namespace, not the process's
		if b4, err = os.ReadFile("/proc/thread-self/net/snmp"); err != nil {
			return err
		}
		b6, err = os.ReadFile("/proc/thread-self/net/snmp6")
		return err
	})
	if err != nil {
		t.Fatalf("nstest: /proc/net/snmp in %s: %v", ns.Name, err)
	}
	out := ParseSNMP(b4)
	for _, line := range strings.Split(string(b6), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				out[f[0]] = v
			}
		}
	}
	return out
}

// ParseSNMP parses /proc/net/snmp (pairs of "Proto: names" and "Proto: values" lines)
// into "Proto.Name" keys.
func ParseSNMP(b []byte) map[string]uint64 {
	out := map[string]uint64{}
	lines := strings.Split(string(b), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		names, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) != len(vals) || len(names) == 0 || names[0] != vals[0] {
			continue
		}
		proto := strings.TrimSuffix(names[0], ":")
		for k := 1; k < len(names); k++ {
			if v, err := strconv.ParseInt(vals[k], 10, 64); err == nil {
				out[proto+"."+names[k]] = uint64(v)
			}
		}
	}
	return out
}

// SetMTU sets the MTU of interface ifname in the namespace.
func (ns *NS) SetMTU(t testing.TB, ifname string, mtu int) {
	t.Helper()
	l, err := ns.nl.LinkByName(ifname)
	if err == nil {
		err = ns.nl.LinkSetMTU(l, mtu)
	}
	if err != nil {
		t.Fatalf("nstest: MTU %d on %s in %s: %v", mtu, ifname, ns.Name, err)
	}
}
