package netbed

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/uswitch"
)

func TestPlanLeafSpine(t *testing.T) {
	p, err := NewPlan(Spec{Kind: KindLeafSpine, Leaves: 3, Spines: 2, HostsPerLeaf: 4, LinkRate: 10e9, Oversubscription: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(p.Nodes); got != 3+2+12 {
		t.Fatalf("nodes = %d, want 17", got)
	}
	if got := len(p.Links); got != 12+6 {
		t.Fatalf("links = %d, want 18", got)
	}
	// 4 hosts x 10G over 2 spines at 2:1 -> 10G uplinks.
	if r := p.Links[p.LinkIndex("leaf1-spine1")].Rate; r != 10e9 {
		t.Fatalf("uplink rate = %v, want 10Gbit", r)
	}
	if p.LinkIndex("spine1-leaf1") != p.LinkIndex("leaf1-spine1") || p.LinkIndex("leaf9-spine0") != -1 {
		t.Fatal("LinkIndex does not find links by either order or finds a missing one")
	}
	addrs := map[string]bool{}
	for _, n := range p.Nodes {
		if n.Addr.IsValid() {
			if addrs[n.Addr.String()] {
				t.Fatalf("duplicate host address %v", n.Addr)
			}
			addrs[n.Addr.String()] = true
		}
	}
	for _, l := range p.Links {
		if len(l.AIf) > 15 || len(l.BIf) > 15 {
			t.Fatalf("interface name too long on %s", l.Name)
		}
	}
	// Each leaf has a multipath route over both spines to each of the other two leaves.
	var mp int
	for _, r := range p.Routes {
		if p.Nodes[r.Node].Router && len(r.Via) == 2 {
			mp++
		}
	}
	if mp != 3*2 {
		t.Fatalf("multipath routes = %d, want 6", mp)
	}
}

func TestPlanFatTree(t *testing.T) {
	p, err := NewPlan(Spec{Kind: KindFatTree, K: 4})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.Leaves != 4 || p.Spec.Spines != 2 || p.Spec.HostsPerLeaf != 2 || len(p.Hosts()) != 8 {
		t.Fatalf("k=4 fat tree expanded to %+v", p.Spec)
	}
}

func TestSpecErrors(t *testing.T) {
	for _, c := range []struct {
		s    Spec
		want string
	}{
		{Spec{}, "kind missing"},
		{Spec{Kind: "ring"}, `kind "ring" unknown`},
		{Spec{Kind: KindLeafSpine, Leaves: 2, Spines: 0, HostsPerLeaf: 1}, "spines 0 out of range"},
		{Spec{Kind: KindFatTree, K: 3}, "k 3 must be even"},
		{Spec{Kind: KindPair, MTU: 100}, "mtu 100 out of range"},
		{Spec{Kind: KindPair, Mode: "emulated"}, "needs a switch"},
		{Spec{Kind: KindPair, Mode: "fast"}, `mode "fast" unknown`},
	} {
		_, err := NewPlan(c.s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err = %v, want %q", c.s, err, c.want)
		}
	}
	if err := CheckName("Bad-Name"); err == nil {
		t.Error("CheckName accepted Bad-Name")
	}
}

// needRoot skips tests that build namespaces when not root.
func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
}

// upTestbed builds spec under a name unique to this run and removes it when the test ends.
// runSwitches starts tb's userspace switches (routing by choose, nil for a star) and
// stops them, checking the stop, when the test ends.
func runSwitches(t testing.TB, tb *Testbed, choose func(string) uswitch.Choose) ([]string, []*uswitch.Switch) {
	t.Helper()
	names, sws, stop, err := tb.RunSwitches(choose, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return names, sws
}

func upTestbed(t testing.TB, spec Spec) *Testbed {
	t.Helper()
	needRoot(t)
	b := make([]byte, 4)
	rand.Read(b)
	name := "t" + hex.EncodeToString(b)
	tb, err := Up(name, spec)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	t.Cleanup(func() {
		if err := tb.Down(); err != nil {
			t.Errorf("down: %v", err)
		}
		if left, _ := Namespaces(name); len(left) > 0 {
			t.Errorf("namespaces left after down: %v", left)
		}
	})
	return tb
}

func TestUpDownPair(t *testing.T) {
	tb := upTestbed(t, Spec{Kind: KindPair, LinkRate: 1e9})
	names, err := Namespaces(tb.Name)
	if err != nil || len(names) != 2 {
		t.Fatalf("namespaces = %v, %v; want 2", names, err)
	}
	rx := listen(t, tb, "h1", 9000)
	tx := dial(t, tb, "h0", 0, tb.Addr("h1"), 9000)
	buf := make([]byte, 4096)
	for i := 0; i < 10; i++ {
		if _, err := tx.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if n := drain(rx, 10, 2*time.Second); n != 10 {
		t.Fatalf("received %d of 10 4-KiB datagrams", n)
	}
	// A crashed run is cleaned by the next Up: build again under the same name.
	tb.Close()
	tb2, err := Up(tb.Name, Spec{Kind: KindPair})
	if err != nil {
		t.Fatalf("up over leftovers: %v", err)
	}
	tb2.Close()
	if names, _ := Namespaces(tb.Name); len(names) != 2 {
		t.Fatalf("after second up: %v", names)
	}
}

// listen opens a UDP socket inside node's namespace.
func listen(t testing.TB, tb *Testbed, node string, port int) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	err := Do(tb.Ns(node), func() (err error) {
		c, err = net.ListenUDP("udp4", &net.UDPAddr{Port: port})
		return err
	})
	if err != nil {
		t.Fatalf("listen in %s: %v", node, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dial opens a UDP socket from srcPort (0: any) in node's namespace to dst.
func dial(t testing.TB, tb *Testbed, node string, srcPort int, dst interface{ AsSlice() []byte }, port int) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	err := Do(tb.Ns(node), func() (err error) {
		c, err = net.DialUDP("udp4", &net.UDPAddr{Port: srcPort}, &net.UDPAddr{IP: dst.AsSlice(), Port: port})
		return err
	})
	if err != nil {
		t.Fatalf("dial from %s:%d: %v", node, srcPort, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// drain reads up to want datagrams, stopping after timeout; it returns how many came.
func drain(c *net.UDPConn, want int, timeout time.Duration) int {
	buf := make([]byte, 65536)
	c.SetReadDeadline(time.Now().Add(timeout))
	n := 0
	for n < want {
		if _, err := c.Read(buf); err != nil {
			break
		}
		n++
	}
	return n
}

// spineRx reads the received-packet counters of every spine.
func spineRx(t testing.TB, tb *Testbed) []uint64 {
	t.Helper()
	out := make([]uint64, tb.Plan.Spec.Spines)
	for s := range out {
		v, err := tb.RxPackets(fmt.Sprintf("spine%d", s))
		if err != nil {
			t.Fatal(err)
		}
		out[s] = v
	}
	return out
}

// pathOf sends k datagrams on c and returns the one spine that carried them all
// (failing the test if they split, or did not all arrive).
func pathOf(t testing.TB, tb *Testbed, c, rx *net.UDPConn, k int) int {
	t.Helper()
	before := spineRx(t, tb)
	buf := make([]byte, 4096)
	for sent := 0; sent < k; {
		b := min(k-sent, 10) // the receiver's default buffer holds about 25 4-KiB datagrams
		for i := 0; i < b; i++ {
			if _, err := c.Write(buf); err != nil {
				t.Fatal(err)
			}
		}
		if n := drain(rx, b, 2*time.Second); n != b {
			t.Fatalf("from %v: %d of %d datagrams arrived", c.LocalAddr(), n, b)
		}
		sent += b
	}
	after := spineRx(t, tb)
	spine := -1
	for s := range after {
		switch d := after[s] - before[s]; {
		case d == 0:
		case d == uint64(k) && spine < 0:
			spine = s
		default:
			t.Fatalf("from %v: spine counters moved %v -> %v; want all %d packets on one spine", c.LocalAddr(), before, after, k)
		}
	}
	if spine < 0 {
		t.Fatalf("from %v: no spine counted the packets (%v -> %v)", c.LocalAddr(), before, after)
	}
	return spine
}

// TestKernelECMP: 2 leaves x 4 spines. 256 source ports spread over all spines; one port
// always takes the same spine; a failed spine link moves traffic to the others; the
// restored link takes its flows back.
func TestKernelECMP(t *testing.T) {
	const spines, ports, k = 4, 256, 4
	tb := upTestbed(t, Spec{Kind: KindLeafSpine, Leaves: 2, Spines: spines, HostsPerLeaf: 1})
	rx := listen(t, tb, "h1", 9000)
	dst := tb.Addr("h1")
	conns := make([]*net.UDPConn, ports)
	for i := range conns {
		conns[i] = dial(t, tb, "h0", 20000+i, dst, 9000)
	}
	spread := func(dead int) ([]int, []int) {
		path := make([]int, ports)
		perSpine := make([]int, spines)
		for i, c := range conns {
			path[i] = pathOf(t, tb, c, rx, k)
			perSpine[path[i]]++
		}
		for s, n := range perSpine {
			if s == dead && n != 0 {
				t.Errorf("spine%d carried %d flows after its link failed", s, n)
			}
			if s != dead && n < ports/(2*spines) {
				t.Errorf("spine%d carried %d of %d flows; want at least %d (flows per spine %v)", s, n, ports, ports/(2*spines), perSpine)
			}
		}
		return path, perSpine
	}
	path, per := spread(-1)
	t.Logf("flows per spine: %v", per)

	fixed := conns[7]
	s0 := path[7]
	for round := 0; round < 5; round++ {
		if s := pathOf(t, tb, fixed, rx, 50); s != s0 {
			t.Fatalf("fixed source port moved from spine%d to spine%d in round %d", s0, s, round)
		}
	}

	link := fmt.Sprintf("leaf0-spine%d", s0)
	if err := tb.LinkDown(link); err != nil {
		t.Fatal(err)
	}
	s1 := pathOf(t, tb, fixed, rx, 50)
	if s1 == s0 {
		t.Fatalf("fixed port still on spine%d after %s went down", s0, link)
	}
	path2, per2 := spread(s0)
	t.Logf("flows per spine with %s down: %v", link, per2)
	for i := range path {
		if path[i] != s0 && path2[i] != path[i] {
			// Plain hash-threshold multipath rehashes some unaffected flows; note, not fail.
			t.Logf("port %d moved from spine%d to spine%d though its spine was alive", 20000+i, path[i], path2[i])
			break
		}
	}

	if err := tb.LinkUp(link); err != nil {
		t.Fatal(err)
	}
	if s := pathOf(t, tb, fixed, rx, 50); s != s0 {
		t.Fatalf("after %s came back the fixed port took spine%d, want spine%d", link, s, s0)
	}
}

// TestKernelLinkdownBlackhole is the control for TestKernelECMP: without
// ignore_routes_with_linkdown the leaf keeps hashing flows onto the dead link and they are lost.
func TestKernelLinkdownBlackhole(t *testing.T) {
	const ports = 64
	tb := upTestbed(t, Spec{Kind: KindLeafSpine, Leaves: 2, Spines: 2, HostsPerLeaf: 1})
	leaf0 := tb.Plan.NodeIndex("leaf0")
	off := [][2]string{{"net/ipv4/conf/all/ignore_routes_with_linkdown", "0"}, {"net/ipv4/conf/default/ignore_routes_with_linkdown", "0"}}
	for _, ifn := range []string{"spine0", "spine1"} {
		off = append(off, [2]string{"net/ipv4/conf/" + ifn + "/ignore_routes_with_linkdown", "0"})
	}
	if err := writeSysctls(tb.NsHandle(leaf0), off); err != nil {
		t.Fatal(err)
	}
	if err := tb.LinkDown("leaf0-spine1"); err != nil {
		t.Fatal(err)
	}
	rx := listen(t, tb, "h1", 9000)
	buf := make([]byte, 1000)
	for i := 0; i < ports; i++ {
		c := dial(t, tb, "h0", 21000+i, tb.Addr("h1"), 9000)
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	got := drain(rx, ports, time.Second)
	t.Logf("%d of %d flows arrived with the linkdown nexthop still in use", got, ports)
	if got == ports || got < ports/8 {
		t.Fatalf("%d of %d flows arrived; want roughly half lost to the dead link", got, ports)
	}
}

var transferPort = 9100

// timeTransfer sends n 4-KiB datagrams from h0 to h1 as fast as the sender's socket allows
// (or one per gap) and returns how many arrived and the time from the first send to the last arrival.
func timeTransfer(t *testing.T, tb *Testbed, n int, gap time.Duration) (int, time.Duration) {
	t.Helper()
	transferPort++
	rx := listen(t, tb, "h1", transferPort)
	tx := dial(t, tb, "h0", 0, tb.Addr("h1"), transferPort)
	tx.SetWriteBuffer(64 << 10) // block in send rather than overflow the shaper's queue
	var got int
	var last time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 9000)
		for got < n {
			rx.SetReadDeadline(time.Now().Add(time.Second))
			if _, err := rx.Read(buf); err != nil {
				return
			}
			got++
			last = time.Now()
		}
	}()
	start := time.Now()
	buf := make([]byte, 4096)
	for i := 0; i < n; i++ {
		if _, err := tx.Write(buf); err != nil {
			t.Fatal(err)
		}
		if gap > 0 {
			time.Sleep(gap)
		}
	}
	<-done
	return got, last.Sub(start)
}

// TestKernelRateAndFailures: tbf shapes a link to its rate, a degraded rate slows it
// further, a flaky link loses a share of packets, and healing restores it.
func TestKernelRateAndFailures(t *testing.T) {
	const n, wire = 150, 4096 + 8 + 20 + 14
	tb := upTestbed(t, Spec{Kind: KindPair, LinkRate: 100e6})
	for _, rate := range []float64{100e6, 20e6} {
		if err := tb.SetRate("h0-h1", config.Rate(rate)); err != nil {
			t.Fatal(err)
		}
		got, el := timeTransfer(t, tb, n, 0)
		min := time.Duration(float64((n-1)*wire*8) / rate * 1e9)
		t.Logf("%g bit/s: %d datagrams in %v (at least %v)", rate, got, el, min)
		if got != n {
			t.Fatalf("%g bit/s: %d of %d arrived", rate, got, n)
		}
		if el < min*9/10 {
			t.Fatalf("%g bit/s: %d datagrams took %v; the shaper should need %v", rate, n, el, min)
		}
	}
	// Loss is per time slot, so the sender is paced: one that sends faster while its
	// packets are being dropped (nothing holds it back) loses more than its share.
	if err := tb.Flaky("h0-h1", 50, 200*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	got, _ := timeTransfer(t, tb, 200, 300*time.Microsecond)
	t.Logf("flaky 50%%: %d of 200 arrived", got)
	if got < 50 || got > 150 {
		t.Fatalf("flaky link at 50%% loss delivered %d of 200", got)
	}
	if err := tb.Flaky("h0-h1", 0, 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := timeTransfer(t, tb, 50, 0); got != 50 {
		t.Fatalf("healed link delivered %d of 50", got)
	}
	if err := tb.SetRate("h0-h1", 0); err != nil {
		t.Fatal(err)
	}
}

// TestReachability: in a k=4 fat tree (kernel routers) and a kernel-bridge star, every
// host reaches every other host.
func TestReachability(t *testing.T) {
	for _, spec := range []Spec{{Kind: KindFatTree, K: 4}, {Kind: KindStar, Hosts: 3}} {
		t.Run(spec.Kind, func(t *testing.T) {
			tb := upTestbed(t, spec)
			hosts := tb.Plan.Hosts()
			rx := make([]*net.UDPConn, len(hosts))
			for i, h := range hosts {
				rx[i] = listen(t, tb, tb.Plan.Nodes[h].Name, 9000)
			}
			buf := make([]byte, 4096)
			for i, a := range hosts {
				for j, b := range hosts {
					if i == j {
						continue
					}
					src, dst := tb.Plan.Nodes[a].Name, tb.Plan.Nodes[b].Name
					c := dial(t, tb, src, 0, tb.Addr(dst), 9000)
					if _, err := c.Write(buf); err != nil {
						t.Fatal(err)
					}
					if drain(rx[j], 1, 2*time.Second) != 1 {
						t.Fatalf("%s -> %s: nothing arrived", src, dst)
					}
					c.Close()
				}
			}
		})
	}
}

// BenchmarkKernelPath measures how many 4 KiB-payload datagrams per second the kernel
// carries from h0 to h1: straight over a veth pair, and through three Linux routers (leaf,
// spine, leaf), unshaped and with tbf at 200 Mbit/s and 1 Gbit/s. One op is one datagram
// offered; fwd/s counts datagrams delivered to h1's interface.
func BenchmarkKernelPath(b *testing.B) {
	for _, c := range []struct {
		name string
		spec Spec
	}{
		{"pair", Spec{Kind: KindPair}},
		{"leafspine", Spec{Kind: KindLeafSpine, Leaves: 2, Spines: 1, HostsPerLeaf: 1}},
		{"leafspine-200Mbit", Spec{Kind: KindLeafSpine, Leaves: 2, Spines: 1, HostsPerLeaf: 1, LinkRate: 200e6}},
		{"leafspine-1Gbit", Spec{Kind: KindLeafSpine, Leaves: 2, Spines: 1, HostsPerLeaf: 1, LinkRate: 1e9}},
	} {
		b.Run(c.name, func(b *testing.B) { measurePath(b, upTestbed(b, c.spec)) })
	}
}

// BenchmarkEmulatedPath is BenchmarkKernelPath through userspace switches: one L2 switch
// (star), and three L3 switches (leaf, spine, leaf) each on its own thread.
func BenchmarkEmulatedPath(b *testing.B) {
	for _, c := range []struct {
		name string
		spec Spec
	}{
		{"star", Spec{Kind: KindStar, Mode: ModeEmulated, Hosts: 2}},
		{"leafspine", Spec{Kind: KindLeafSpine, Mode: ModeEmulated, Leaves: 2, Spines: 1, HostsPerLeaf: 1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			tb := upTestbed(b, c.spec)
			_, _, stop, err := tb.RunSwitches(testChoose, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer stop()
			measurePath(b, tb)
		})
	}
}

// measurePath blasts b.N 4 KiB datagrams from h0 to h1 and reports what arrived.
func measurePath(b *testing.B, tb *Testbed) {
	listen(b, tb, "h1", 9000) // bound, so no ICMP unreachable comes back
	bl, err := NewBlaster(tb.Ns("h0"), 0, netip.AddrPortFrom(tb.Addr("h1"), 9000), 4096)
	if err != nil {
		b.Fatal(err)
	}
	defer bl.Close()
	rx := func() uint64 {
		st, err := tb.Stats("h1")
		if err != nil {
			b.Fatal(err)
		}
		return st[0].RxPackets
	}
	before := rx()
	stop := make(chan struct{})
	timer := time.AfterFunc(20*time.Second, func() { close(stop) })
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	bl.Send(b.N, stop)
	timer.Stop()
	var got uint64
	for prev := uint64(0); ; prev = got {
		time.Sleep(5 * time.Millisecond)
		if got = rx() - before; got == prev {
			break
		}
	}
	el := time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(float64(got)/el, "fwd/s")
	b.ReportMetric(float64(got)*4138*8/el/1e9, "Gbit/s")
	b.ReportMetric(float64(got)/float64(b.N), "delivered")
}

// testChoose is a stand-in ECMP choice for tests (the shared one is test/switchport's):
// FNV-1a over the node's name and the 5-tuple, finished with a 64-bit mixer.
func testChoose(node string) uswitch.Choose {
	salt := uint64(14695981039346656037)
	for _, c := range []byte(node) {
		salt = (salt ^ uint64(c)) * 1099511628211
	}
	return func(src, dst uint32, proto uint8, sp, dp uint16, n int) int {
		h := salt
		for _, w := range []uint64{uint64(src), uint64(dst), uint64(proto), uint64(sp), uint64(dp)} {
			h = (h ^ w) * 1099511628211
		}
		h ^= h >> 33
		h *= 0xff51afd7ed558ccd
		h ^= h >> 33
		return int((h >> 32) * uint64(n) >> 32)
	}
}

// TestEmulatedECMP: 2 leaves x 4 spines of userspace L3 switches. Every one of 256 source
// ports takes exactly the spine the ECMP choice predicts, all spines carry flows, and the
// datagrams arrive (MACs, TTL and checksums rewritten correctly).
func TestEmulatedECMP(t *testing.T) {
	const spines, ports, k = 4, 256, 2
	tb := upTestbed(t, Spec{Kind: KindLeafSpine, Mode: ModeEmulated, Leaves: 2, Spines: spines, HostsPerLeaf: 1})
	names, sws := runSwitches(t, tb, testChoose)
	rx := listen(t, tb, "h1", 9000)
	src, dst := tb.Addr("h0").As4(), tb.Addr("h1").As4()
	choose := testChoose("leaf0")
	perSpine := make([]int, spines)
	for i := 0; i < ports; i++ {
		port := 20000 + i
		c := dial(t, tb, "h0", port, tb.Addr("h1"), 9000)
		s := pathOf(t, tb, c, rx, k)
		want := choose(binary.BigEndian.Uint32(src[:]), binary.BigEndian.Uint32(dst[:]), 17, uint16(port), 9000, spines)
		if s != want {
			t.Fatalf("port %d took spine%d; the ECMP choice says spine%d", port, s, want)
		}
		perSpine[s]++
		c.Close()
	}
	t.Logf("flows per spine: %v", perSpine)
	for s, n := range perSpine {
		if n < ports/(2*spines) {
			t.Errorf("spine%d carried %d of %d flows (%v)", s, n, ports, perSpine)
		}
	}

	// A failed link: the switch keeps hashing into it (no routing reaction), and the
	// packets it sends there are counted as lost on the leaf's port.
	port := 20000
	dead := choose(binary.BigEndian.Uint32(src[:]), binary.BigEndian.Uint32(dst[:]), 17, uint16(port), 9000, spines)
	if err := tb.LinkDown(fmt.Sprintf("leaf0-spine%d", dead)); err != nil {
		t.Fatal(err)
	}
	lost := func() uint64 {
		st, err := tb.Stats("leaf0")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			if s.If == fmt.Sprintf("spine%d", dead) {
				return s.TxDropped + s.Errors
			}
		}
		t.Fatal("leaf0 has no port to the failed spine")
		return 0
	}
	before := lost()
	c := dial(t, tb, "h0", port, tb.Addr("h1"), 9000)
	for i := 0; i < 10; i++ {
		c.Write(make([]byte, 4096))
	}
	if n := drain(rx, 10, 300*time.Millisecond); n != 0 {
		t.Fatalf("%d datagrams crossed a failed link", n)
	}
	if d := lost() - before; d != 10 {
		t.Fatalf("leaf0's port to the failed spine counted %d lost packets, want 10", d)
	}
	for i, n := range names {
		if n != "leaf0" {
			continue
		}
		for p, sp := range tb.SwitchPorts(tb.Plan.NodeIndex(n)) {
			if sp.If == fmt.Sprintf("spine%d", dead) {
				if e := sws[i].Stats(p).TxErrors; e != 10 {
					t.Fatalf("leaf0 switch counted %d frames refused by the failed port, want 10", e)
				}
				return
			}
		}
	}
	t.Fatal("no leaf0 switch port to the failed spine")
}

// TestStartAndReap: a process started in a host namespace runs there, and Down kills it.
func TestStartAndReap(t *testing.T) {
	tb := upTestbed(t, Spec{Kind: KindPair})
	cmd := exec.Command("sleep", "30")
	if err := tb.Start("h0", cmd); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
	ino, ierr := nsInode(tb.Ns("h0"))
	if err != nil || ierr != nil || link != fmt.Sprintf("net:[%d]", ino) {
		t.Fatalf("child's namespace %q (%v), h0's inode %d (%v)", link, err, ino, ierr)
	}
	if err := Remove(tb.Name); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the process in the testbed survived Down")
	}
}
