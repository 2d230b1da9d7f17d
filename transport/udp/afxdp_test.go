//go:build linux

package udp_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/udp"
	"github.com/smartt-transport/smartt/transport/udp/xsk"
)

// needAFXDP skips the test when the kernel has no AF_XDP (the probe's reason), and only
// then: on a kernel that has it the datapath must work.
func needAFXDP(t *testing.T, ns *nstest.NS) {
	t.Helper()
	var err error
	ns.Do(func() error {
		l, e := net.InterfaceByName("veth0")
		if e != nil {
			return e
		}
		err = xsk.Probe(xsk.Config{Ifindex: l.Index})
		return nil
	})
	if errors.Is(err, syscall.EAFNOSUPPORT) {
		t.Skipf("AF_XDP unavailable: %v", err)
	}
}

// exchange sends n packets from a to b with EVs, ECN and classes varying, and checks what
// b reads: payload, source port (the EV's), ECN and DSCP.
func exchange(t *testing.T, a, b *udp.Conn, n int) { t.Helper(); exchangeMode(t, a, b, n, false) }

// exchangeMode is exchange with b reading in place (ReadBatchInPlace) or not, every
// payload compared whole.
func exchangeMode(t *testing.T, a, b *udp.Conn, n int, inPlace bool) {
	t.Helper()
	out := make([]udp.Packet, n)
	for i := range out {
		buf := bytes.Repeat([]byte{byte(i)}, 100+i*83%8000)
		out[i] = udp.Packet{Buf: buf, N: len(buf), Addr: b.LocalAddr(), EV: uint16(i * 7), ECN: uint8(i % 3), Control: i%5 == 0}
	}
	for sent := 0; sent < n; {
		k, err := a.WriteBatch(out[sent:min(n, sent+16)])
		if err != nil {
			t.Fatalf("WriteBatch: %v", err)
		}
		sent += k
	}
	in := make([]udp.Packet, 64)
	store := make([][]byte, len(in))
	for i := range in {
		store[i] = make([]byte, 9000)
	}
	read := b.ReadBatch
	if inPlace {
		read = b.ReadBatchInPlace
	}
	b.SetReadDeadline(time.Now().Add(2 * time.Second))
	defer b.SetReadDeadline(time.Time{})
	for got := 0; got < n; {
		for i := range in {
			in[i].Buf = store[i]
		}
		k, err := read(in)
		if err != nil {
			t.Fatalf("ReadBatch after %d of %d: %v (stats %+v)", got, n, err, b.Stats())
		}
		for _, p := range in[:k] {
			w := out[got]
			dscp := uint8(10)
			if w.Control {
				dscp = 46
			}
			if p.N != w.N || !bytes.Equal(p.Buf[:p.N], w.Buf[:w.N]) || p.Addr != netip.AddrPortFrom(a.LocalAddr().Addr(), a.EVPort(w.EV)) ||
				p.ECN != w.ECN || p.DSCP != dscp {
				t.Fatalf("packet %d: %d bytes from %v ECN %d DSCP %d; want %d bytes from port %d ECN %d DSCP %d",
					got, p.N, p.Addr, p.ECN, p.DSCP, w.N, a.EVPort(w.EV), w.ECN, dscp)
			}
			got++
		}
	}
}

// With datapath afxdp, two Conns on a veth pair exchange packets both ways through AF_XDP
// (after the first packets to a new neighbour, which take the sockets) with the EV's
// source port, ECN and DSCP intact; a second afxdp Conn on the same interface finds the
// XDP program taken and falls back to sockets with a warning, and still works.
func TestAFXDPDatapath(t *testing.T) {
	tp := nstest.Pair(t)
	needAFXDP(t, tp.A)
	var logA strings.Builder
	cfg := func(addr netip.Addr, port uint16, log io.Writer) udp.Config {
		return udp.Config{Listen: netip.AddrPortFrom(addr, port), EVS: 64, Datapath: udp.DatapathAFXDP, DataDSCP: 10, ControlDSCP: 46,
			RecvBuffer: 8 << 20, Logger: slog.New(slog.NewTextHandler(log, nil))}
	}
	a := openIn(t, tp.A, cfg(tp.AddrA, 23600, &logA))
	b := openIn(t, tp.B, cfg(tp.AddrB, 23600, io.Discard))
	for _, c := range []*udp.Conn{a, b} {
		// Generic XDP on a veth: cheaper than native there (afxdp.go).
		if cp := c.Caps(); cp.Datapath != udp.DatapathAFXDP || cp.XDPMode != xsk.ModeGeneric {
			t.Fatalf("%v: caps %+v, want the afxdp datapath, XDP generic on a veth (log: %s)", c.LocalAddr(), cp, logA.String())
		}
	}
	if !strings.Contains(logA.String(), "datapath=afxdp") {
		t.Fatalf("open log does not name the datapath: %s", logA.String())
	}
	// One packet each way first: until ARP resolves, packets take the sockets, and the
	// kernel holds only so many bytes for an unresolved neighbour.
	inB := tp.B.SNMP(t)["Udp.InDatagrams"] // after Open's loopback probe
	exchange(t, a, b, 1)
	exchange(t, b, a, 1)
	time.Sleep(20 * time.Millisecond) // past the next neighbour look-up (every 1 ms)
	outA, outB := tp.A.SNMP(t)["Udp.OutDatagrams"], tp.B.SNMP(t)["Udp.OutDatagrams"]
	exchange(t, a, b, 300)
	exchange(t, b, a, 300)
	exchangeMode(t, a, b, 300, true)
	exchangeMode(t, b, a, 300, true)
	if oa, ob := tp.A.SNMP(t)["Udp.OutDatagrams"]-outA, tp.B.SNMP(t)["Udp.OutDatagrams"]-outB; oa != 0 || ob != 0 {
		t.Fatalf("the UDP stacks sent %d (A) and %d (B) datagrams: AF_XDP did not carry them", oa, ob)
	}
	sa, sb := a.Stats(), b.Stats()
	if sa.TxPackets != 601 || sb.RxPackets != 601 || sb.RxMalformed != 0 {
		t.Fatalf("A sent %d, B received %d (%d malformed), want 601", sa.TxPackets, sb.RxPackets, sb.RxMalformed)
	}
	// On receive the XDP program takes every packet to the listen port, whichever way
	// it was sent: B's UDP stack saw none of them.
	if n := tp.B.SNMP(t)["Udp.InDatagrams"] - inB; n != 0 {
		t.Fatalf("B's UDP stack received %d datagrams: AF_XDP did not carry the traffic", n)
	}

	var logC strings.Builder
	c := openIn(t, tp.A, cfg(tp.AddrA, 23700, &logC))
	if cp := c.Caps(); cp.Datapath != udp.DatapathSockets || !strings.Contains(logC.String(), "AF_XDP datapath unavailable") {
		t.Fatalf("second Conn on the interface: caps %+v, log %s; want a logged fallback to sockets", cp, logC.String())
	}
	exchange(t, c, b, 50)

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	var attached bool
	tp.A.Do(func() error {
		l, _ := net.InterfaceByName("veth0")
		err := xsk.Probe(xsk.Config{Ifindex: l.Index})
		attached = err != nil
		return nil
	})
	if attached {
		t.Fatal("queue 0 still taken after Close")
	}
}

// A blocked ReadBatch on the AF_XDP datapath returns at its deadline and at Close.
func TestAFXDPReadUnblocks(t *testing.T) {
	tp := nstest.Pair(t)
	needAFXDP(t, tp.A)
	a := openIn(t, tp.A, udp.Config{Listen: netip.AddrPortFrom(tp.AddrA, 23600), EVS: 4, Datapath: udp.DatapathAFXDP})
	if a.Caps().Datapath != udp.DatapathAFXDP {
		t.Fatalf("caps %+v", a.Caps())
	}
	in := []udp.Packet{{Buf: make([]byte, 9000)}}
	a.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := a.ReadBatch(in); !errors.Is(err, syscall.ETIMEDOUT) && !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("ReadBatch past its deadline: %v", err)
	}
	a.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() { _, err := a.ReadBatch(in); done <- err }()
	time.Sleep(50 * time.Millisecond)
	a.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("ReadBatch after Close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("ReadBatch still blocked after Close")
	}
}

// WriteBatch (of its own buffers or of TxBuffers'), ReadBatch and ReadBatchInPlace on the
// AF_XDP datapath allocate nothing per packet.
func TestAFXDPZeroAllocs(t *testing.T) {
	tp := nstest.Pair(t)
	needAFXDP(t, tp.A)
	cfg := func(addr netip.Addr) udp.Config {
		return udp.Config{Listen: netip.AddrPortFrom(addr, 23600), EVS: 64, Datapath: udp.DatapathAFXDP, DataDSCP: 10, ControlDSCP: 46}
	}
	a, b := openIn(t, tp.A, cfg(tp.AddrA)), openIn(t, tp.B, cfg(tp.AddrB))
	exchange(t, a, b, 1) // the neighbour entry: from now on everything goes through AF_XDP
	out := make([]udp.Packet, 64)
	buf := make([]byte, 4096)
	for i := range out {
		out[i] = udp.Packet{Buf: buf, N: len(buf), Addr: b.LocalAddr(), EV: uint16(i), ECN: udp.ECT0}
	}
	in := make([]udp.Packet, 64)
	store := make([][]byte, len(in))
	for i := range in {
		store[i] = make([]byte, 4096)
	}
	read := b.ReadBatch
	round := func() {
		if k, err := a.WriteBatch(out); k != len(out) || err != nil {
			t.Fatalf("WriteBatch: %d, %v", k, err)
		}
		for got := 0; got < len(out); {
			for i := range in {
				in[i].Buf = store[i]
			}
			k, err := read(in)
			if err != nil {
				t.Fatalf("ReadBatch: %v", err)
			}
			got += k
		}
	}
	// Until the next hop is resolved (a netlink look-up, allocating, at most every 1 ms)
	// packets leave through the sockets: wait for a round that A's UDP stack did not send.
	for try := 0; ; try++ {
		before := tp.A.SNMP(t)["Udp.OutDatagrams"]
		round()
		if tp.A.SNMP(t)["Udp.OutDatagrams"] == before {
			break
		}
		if try == 100 {
			t.Fatal("packets still take the sockets after 100 rounds")
		}
		time.Sleep(15 * time.Millisecond)
	}
	out0, in0 := tp.A.SNMP(t)["Udp.OutDatagrams"], tp.B.SNMP(t)["Udp.InDatagrams"]
	if n := testing.AllocsPerRun(20, round); n != 0 {
		t.Fatalf("%.1f allocations per 64-packet round, want 0", n)
	}
	read = b.ReadBatchInPlace
	if n := testing.AllocsPerRun(20, round); n != 0 {
		t.Fatalf("in place: %.1f allocations per 64-packet round, want 0", n)
	}
	lend := make([]udp.Packet, len(out))
	inPlace := func() {
		if k := a.TxBuffers(lend); k != len(lend) {
			t.Fatalf("TxBuffers: %d of %d", k, len(lend))
		}
		for i := range out {
			out[i].Buf = lend[i].Buf
		}
		round()
	}
	if n := testing.AllocsPerRun(20, inPlace); n != 0 {
		t.Fatalf("sent in place: %.1f allocations per 64-packet round, want 0", n)
	}
	// Neither end's UDP stack saw the 63 x 64 packets.
	if o, i := tp.A.SNMP(t)["Udp.OutDatagrams"]-out0, tp.B.SNMP(t)["Udp.InDatagrams"]-in0; o != 0 || i != 0 {
		t.Fatalf("not on AF_XDP: A's UDP stack sent %d datagrams, B's received %d", o, i)
	}
}

// Datapath auto takes AF_XDP where it fits and the probe succeeds, and sockets, with an
// info line saying why, where it does not: a second Conn on the interface (the XDP
// program is taken: the probe fails), an unspecified listen address, an interface with
// two receive queues. Each still moves packets.
func TestAFXDPAuto(t *testing.T) {
	tp := nstest.Pair(t)
	needAFXDP(t, tp.A)
	open := func(ns *nstest.NS, ap netip.AddrPort) (*udp.Conn, string) {
		var log strings.Builder
		c := openIn(t, ns, udp.Config{Listen: ap, EVS: 64, Datapath: udp.DatapathAuto, DataDSCP: 10, ControlDSCP: 46, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		return c, log.String()
	}
	a, log := open(tp.A, netip.AddrPortFrom(tp.AddrA, 23600))
	if cp := a.Caps(); cp.Datapath != udp.DatapathAFXDP {
		t.Fatalf("auto on a one-queue veth with an IPv4 address: caps %+v, want afxdp (log %s)", cp, log)
	}
	b := openIn(t, tp.B, udp.Config{Listen: netip.AddrPortFrom(tp.AddrB, 23600), EVS: 64, DataDSCP: 10, ControlDSCP: 46})
	exchange(t, a, b, 50)
	exchange(t, b, a, 50)

	c, log := open(tp.A, netip.AddrPortFrom(tp.AddrA, 23700))
	if cp := c.Caps(); cp.Datapath != udp.DatapathSockets || !strings.Contains(log, "datapath auto: AF_XDP unavailable") || !strings.Contains(log, "level=INFO") {
		t.Fatalf("auto with the interface's XDP slot taken: caps %+v, log %s; want sockets and an info line", cp, log)
	}
	exchange(t, c, b, 20)

	d, log := open(tp.A, netip.AddrPortFrom(netip.IPv4Unspecified(), 23800))
	if cp := d.Caps(); cp.Datapath != udp.DatapathSockets || !strings.Contains(log, "not a specific IPv4 address") {
		t.Fatalf("auto on 0.0.0.0: caps %+v, log %s; want sockets and why", cp, log)
	}

	// A veth pair with two receive queues a side, in A's namespace.
	tp.A.MustExec(t, "ip", "link", "add", "mq0", "numtxqueues", "2", "numrxqueues", "2", "type", "veth", "peer", "name", "mq1", "numtxqueues", "2", "numrxqueues", "2")
	tp.A.MustExec(t, "ip", "addr", "add", "10.250.0.1/24", "dev", "mq0")
	tp.A.MustExec(t, "ip", "link", "set", "mq0", "up")
	tp.A.MustExec(t, "ip", "link", "set", "mq1", "up")
	e, log := open(tp.A, netip.MustParseAddrPort("10.250.0.1:23600"))
	if cp := e.Caps(); cp.Datapath != udp.DatapathSockets || !strings.Contains(log, "mq0 has 2 receive queues") {
		t.Fatalf("auto on a two-queue interface: caps %+v, log %s; want sockets and why", cp, log)
	}
}
