package smarttd_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// BenchmarkVethRecvRing compares the API's receive paths in one run with interleaved
// rounds: the daemon pair over the veth of BenchmarkVethDaemonVsBlaster with
// lb: ecmp (GSO, where the API's copies are the gap to the blaster), b.N x 4 KiB in 16
// MiB messages, 4 outstanding, with the receiving client reading from the socket (the
// path before the automatic ring: SetAutoRecvRing(0)) or from a shared-memory receive
// ring (EnableRecvRing, 64 MiB, messages read in place), each with the
// sender streaming the message through the socket or passing it as a sealed memfd
// (SendFD); then the 64-byte round trip through both daemons and clients, beside the
// kernel's UDP ping-pong, with three daemon pairs up at once so that their round trips
// alternate in chunks of 50: every frame through the session's writer
// (api.direct_writes: false), the default (small frames written directly), and the
// default with both clients on rings. Rounds (RECVRING_ROUNDS, default 5) are
// sub-benchmarks; scripts/recvring-report turns the output into the tables of
// docs/datapath.md (ratios to the socket path within each round).
func BenchmarkVethRecvRing(b *testing.B) {
	tp := nstest.Pair(b)
	rtts := envInt("RECVRING_RTTS", 2000)
	for round := range envInt("RECVRING_ROUNDS", 5) {
		for _, v := range []struct {
			name        string
			memfd, ring bool
		}{{"socket", false, false}, {"ring", false, true}, {"memfd", true, false}, {"memfd+ring", true, true}} {
			b.Run(fmt.Sprintf("round=%d/path=%s", round, v.name), func(b *testing.B) {
				r := runPair(b, tp, b.N, pairOpts{lb: "ecmp", memfd: v.memfd, ring: v.ring, socket: !v.ring})
				r.goodput(b, true)
			})
		}
		b.Run(fmt.Sprintf("round=%d/rtt", round), func(b *testing.B) {
			runRTTInterleaved(b, tp, rtts)
		})
	}
}

// runRTTInterleaved measures n 64-byte round trips for each of: a daemon pair with
// api.direct_writes false ("writer"), one with the defaults ("socket"), one with both
// clients on receive rings ("ring"), and the kernel's UDP ping-pong ("kernel"), all set
// up at once and alternating in chunks of 50 round trips; it reports each one's p50 and
// p99 in microseconds and the p50 ratios.
func runRTTInterleaved(b *testing.B, tp *nstest.Topo, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	defer cancel()
	dir := tempDir(b)
	pair := func(name string, port uint16, direct, ring bool) *rig {
		return daemonRig(b, ctx, tp, dir, name, port, func(c *smarttd.Config) { c.API.DirectWrites = direct }, ring)
	}
	rigs := []*rig{pair("writer", 23600, false, false), pair("socket", 24600, true, false), pair("ring", 25600, true, true), kernelRig(b, tp)}
	b.ResetTimer()
	alternate(rigs, n)
	b.StopTimer()
	for _, r := range rigs {
		b.ReportMetric(pct(r.us, 0.5), r.name+"_p50_us")
		b.ReportMetric(pct(r.us, 0.99), r.name+"_p99_us")
	}
}

// alternate warms rigs up (first contact and ARP out of the way) and then runs n round
// trips of each, alternating between them in chunks of 50, into each rig's samples and
// the process's CPU time during its chunks.
func alternate(rigs []*rig, n int) {
	for _, r := range rigs {
		for range 20 {
			r.trip()
		}
	}
	const chunk = 50
	for done := 0; done < n; done += chunk {
		for _, r := range rigs {
			c0 := cpuUs()
			for range min(chunk, n-done) {
				if us, ok := r.trip(); ok {
					r.us = append(r.us, us)
				}
			}
			r.cpu += cpuUs() - c0
		}
	}
}

// rig is one way of doing a 64-byte round trip (a daemon pair and its clients, or the
// kernel's UDP ping-pong) and its samples in microseconds.
type rig struct {
	name string
	trip func() (float64, bool)
	us   []float64
	cpu  float64         // process CPU us during its round trips (alternate)
	a, d *smarttd.Daemon // nil for the kernel's
	// oneway is a 64-byte Send from A's session to a session at B that never answers,
	// until its Sent (the ACK) is back, in microseconds (daemon pairs only).
	oneway func() float64
}

// daemonRig starts a daemon pair on port in tp's two namespaces (mod adjusts both
// configs), a client session at each (on receive rings if ring) and an echo at B.
func daemonRig(b *testing.B, ctx context.Context, tp *nstest.Topo, dir, name string, port uint16, mod func(*smarttd.Config), ring bool) *rig {
	msg := make([]byte, 64)
	m2 := func(c *smarttd.Config) {
		if mod != nil {
			mod(c)
		}
		c.API.Socket = fmt.Sprintf("%s/%s-%d.sock", dir, c.Listen.Addr(), port)
	}
	la, lb := netip.AddrPortFrom(tp.AddrA, port), netip.AddrPortFrom(tp.AddrB, port)
	a, d := startIn(b, tp.A, la, dir, m2), startIn(b, tp.B, lb, dir, m2)
	b.Cleanup(func() { stopDaemon(a); stopDaemon(d) })
	sa, _ := echoPair(b, ctx, a, d, ring)
	sink := session(b, ctx, d, 2)
	go func() {
		for {
			m, err := sink.Recv(ctx)
			if err != nil {
				return
			}
			m.Release()
		}
	}()
	oneway := func() float64 {
		t0 := time.Now()
		if _, err := sa.Send(ctx, lb, 2, msg); err != nil {
			b.Fatal(err)
		}
		return float64(time.Since(t0).Nanoseconds()) / 1e3
	}
	return &rig{name: name, a: a, d: d, oneway: oneway, trip: func() (float64, bool) {
		return echoTrip(b, ctx, sa, lb, msg), true
	}}
}

// kernelRig is the kernel's UDP ping-pong between tp's namespaces (Go sockets, blocking
// reads).
func kernelRig(b *testing.B, tp *nstest.Topo) *rig {
	msg := make([]byte, 64)
	var echo, cl *net.UDPConn
	for _, x := range []struct {
		ns   *nstest.NS
		addr netip.Addr
		c    **net.UDPConn
	}{{tp.B, tp.AddrB, &echo}, {tp.A, tp.AddrA, &cl}} {
		if err := x.ns.Do(func() error {
			c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(x.addr, 0)))
			*x.c = c
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { echo.Close(); cl.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			k, from, err := echo.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			echo.WriteToUDPAddrPort(buf[:k], from)
		}
	}()
	dst := echo.LocalAddr().(*net.UDPAddr).AddrPort()
	buf := make([]byte, 2048)
	return &rig{name: "kernel", trip: func() (float64, bool) {
		t0 := time.Now()
		if _, err := cl.WriteToUDPAddrPort(msg, dst); err != nil {
			b.Fatal(err)
		}
		cl.SetReadDeadline(time.Now().Add(time.Second))
		if _, _, err := cl.ReadFromUDPAddrPort(buf); err != nil {
			return 0, false // lost: not a sample
		}
		return float64(time.Since(t0).Nanoseconds()) / 1e3, true
	}}
}
