package smarttd_test

import (
	"context"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/clienttest"
	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// BenchmarkVethLatency is the round trip of a 64-byte message through both daemons and
// their clients (client A sends to an echoing client B, which sends it back), beside a
// kernel UDP ping-pong between the same two namespaces (Go sockets, blocking reads), with
// the default configuration; the two alternate in rounds of b.N/4 round trips so the
// shared machine's load affects them alike. Reports p50 and p99 of each in microseconds
// and the ratio of the p50s (goal: daemon <= 4x kernel). Use e.g. -benchtime=20000x.
func BenchmarkVethLatency(b *testing.B) {
	tp := nstest.Pair(b)
	lat := runLatency(b, tp, b.N, nil)
	lat.report(b)
}

// latency is what runLatency measured, in microseconds.
type latency struct{ daemon, kernel []float64 }

func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func (l latency) report(b *testing.B) {
	dp50, kp50 := pct(l.daemon, 0.5), pct(l.kernel, 0.5)
	b.ReportMetric(dp50, "daemon_p50_us")
	b.ReportMetric(pct(l.daemon, 0.99), "daemon_p99_us")
	b.ReportMetric(kp50, "kernel_p50_us")
	b.ReportMetric(pct(l.kernel, 0.99), "kernel_p99_us")
	if kp50 > 0 {
		b.ReportMetric(dp50/kp50, "p50_ratio")
	}
}

// runLatency measures n round trips each way (see BenchmarkVethLatency); mod adjusts both
// daemons' configs.
func runLatency(b *testing.B, tp *nstest.Topo, n int, mod func(*smarttd.Config)) latency {
	return runLatencyRing(b, tp, n, mod, false)
}

// runLatencyRing is runLatency with both clients receiving through a shared-memory ring
// when ring is set.
func runLatencyRing(b *testing.B, tp *nstest.Topo, n int, mod func(*smarttd.Config), ring bool) latency {
	dir := tempDir(b)
	la, lb := netip.AddrPortFrom(tp.AddrA, 23600), netip.AddrPortFrom(tp.AddrB, 23600)
	a := startIn(b, tp.A, la, dir, mod)
	d := startIn(b, tp.B, lb, dir, mod)
	defer stopDaemon(a)
	defer stopDaemon(d)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	sa, _ := echoPair(b, ctx, a, d, ring)
	kr := kernelRig(b, tp) // the kernel's ping-pong: an echo socket in B, a client socket in A
	msg := make([]byte, 64)
	var l latency
	warm := func() { // first contact and ARP out of the way
		echoTrip(b, ctx, sa, lb, msg)
		kr.trip()
	}
	warm()
	b.ResetTimer()
	const rounds = 4
	for r := range rounds {
		k := n / rounds
		if r < n%rounds {
			k++
		}
		for range k {
			l.daemon = append(l.daemon, echoTrip(b, ctx, sa, lb, msg))
		}
		for range k {
			if us, ok := kr.trip(); ok { // a lost datagram is not a sample
				l.kernel = append(l.kernel, us)
			}
		}
	}
	b.StopTimer()
	return l
}

// BenchmarkVethLatencyAckHold compares ack.complete_delay off and on in one
// run: two daemon pairs over the veth of BenchmarkVethLatency, one with every completion
// ACKed at once ("hold0") and one whose completion ACKs wait up to 500 us for the answer
// and ride in its batch ("hold"), beside the kernel's UDP ping-pong, alternating in
// chunks of 50 round trips within each of LAT_ROUNDS rounds (default 5) of b.N round
// trips each. Reports p50 of each (all rounds), the min / median / max over rounds of the
// per-round p50 ratios (hold vs hold0, each vs the kernel), and the held pair's ACKs that
// rode with data per round-trip message; and, the cost of holds nobody answers, a one-way
// Send (up to 1,000 per round and pair, waiting for each Sent) to a session that never
// answers: its p50, p90 and p99 per pair; and the process's CPU time per round trip during
// each one's chunks (both daemons, both clients and the idle pair's timers).
func BenchmarkVethLatencyAckHold(b *testing.B) {
	tp := nstest.Pair(b)
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Second)
	defer cancel()
	dir := tempDir(b)
	hold := func(d config.Duration) func(*smarttd.Config) {
		return func(c *smarttd.Config) { c.Transport.Ack.CompleteDelay = d }
	}
	rigs := []*rig{daemonRig(b, ctx, tp, dir, "hold0", 23610, hold(0), false),
		daemonRig(b, ctx, tp, dir, "hold", 24610, hold(500_000), false), kernelRig(b, tp)}
	for _, r := range rigs { // first contact and ARP out of the way
		for range 20 {
			r.trip()
		}
	}
	held := rigs[1]
	st0 := held.a.Node.Stats()
	daemon.AddStats(&st0, ptr(held.d.Node.Stats()))
	var ratios [3][]float64           // hold/hold0, hold0/kernel, hold/kernel
	var ow [2][]float64               // one-way Send to a session that never answers, hold0 and hold
	cpu := make([]float64, len(rigs)) // process CPU us during each rig's round trips
	b.ResetTimer()
	const chunk = 50
	for range envInt("LAT_ROUNDS", 5) {
		round := make([][]float64, len(rigs))
		for done := 0; done < b.N; done += chunk {
			for i, r := range rigs {
				c0 := cpuUs()
				for range min(chunk, b.N-done) {
					if us, ok := r.trip(); ok {
						round[i] = append(round[i], us)
					}
				}
				cpu[i] += cpuUs() - c0
			}
		}
		p := make([]float64, len(rigs))
		for i, r := range rigs {
			r.us = append(r.us, round[i]...)
			p[i] = pct(round[i], 0.5)
		}
		for i, r := range rigs[:2] { // one-way Sends, the cost of holds nobody answers
			for range min(b.N, 1000) {
				ow[i] = append(ow[i], r.oneway())
			}
		}
		ratios[0] = append(ratios[0], p[1]/p[0])
		ratios[1] = append(ratios[1], p[0]/p[2])
		ratios[2] = append(ratios[2], p[1]/p[2])
	}
	b.StopTimer()
	st := held.a.Node.Stats()
	daemon.AddStats(&st, ptr(held.d.Node.Stats()))
	for _, r := range rigs {
		b.ReportMetric(pct(r.us, 0.5), r.name+"_p50_us")
		b.ReportMetric(pct(r.us, 0.99), r.name+"_p99_us")
	}
	for i, name := range []string{"hold/hold0", "hold0/kernel", "hold/kernel"} {
		b.ReportMetric(pct(ratios[i], 0), name+"_p50_min")
		b.ReportMetric(pct(ratios[i], 0.5), name+"_p50_med")
		b.ReportMetric(pct(ratios[i], 1), name+"_p50_max")
	}
	for i, r := range rigs {
		b.ReportMetric(cpu[i]/float64(max(len(r.us), 1)), r.name+"_cpu_us/trip")
	}
	for i, r := range rigs[:2] {
		b.ReportMetric(pct(ow[i], 0.5), r.name+"_oneway_p50_us")
		b.ReportMetric(pct(ow[i], 0.9), r.name+"_oneway_p90_us")
		b.ReportMetric(pct(ow[i], 0.99), r.name+"_oneway_p99_us")
	}
	// Two messages per round trip; the one-way Sends' holds never ride.
	b.ReportMetric(float64(st.AcksRode-st0.AcksRode)/float64(max(2*len(held.us), 1)), "hold_rode/rt_msg")
}

// BenchmarkVethLatencyBusyPoll compares udp.busy_poll off (the default) with 20 us and
// 200 us on both daemons (the optional busy-poll mode): three daemon pairs up at
// once and the kernel's ping-pong, alternating in chunks of 50 round trips, b.N each per
// round (LAT_ROUNDS, default 5). Reports each one's p50 over all rounds, the median over
// rounds of each pair's per-round p50 against the default's and the kernel's, and the
// process's CPU time per round trip during each one's chunks.
func BenchmarkVethLatencyBusyPoll(b *testing.B) {
	tp := nstest.Pair(b)
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Second)
	defer cancel()
	dir := tempDir(b)
	poll := func(d config.Duration) func(*smarttd.Config) {
		return func(c *smarttd.Config) { c.UDP.BusyPoll = d }
	}
	rigs := []*rig{daemonRig(b, ctx, tp, dir, "off", 23620, poll(0), false),
		daemonRig(b, ctx, tp, dir, "poll20us", 24620, poll(20_000), false),
		daemonRig(b, ctx, tp, dir, "poll200us", 25620, poll(200_000), false), kernelRig(b, tp)}
	vsOff := make([][]float64, len(rigs))
	vsKernel := make([][]float64, len(rigs))
	b.ResetTimer()
	for range envInt("LAT_ROUNDS", 5) {
		start := make([]int, len(rigs))
		for i, r := range rigs {
			start[i] = len(r.us)
		}
		alternate(rigs, b.N)
		p := make([]float64, len(rigs))
		for i, r := range rigs {
			p[i] = pct(r.us[start[i]:], 0.5)
		}
		for i := range rigs {
			vsOff[i] = append(vsOff[i], p[i]/p[0])
			vsKernel[i] = append(vsKernel[i], p[i]/p[len(p)-1])
		}
	}
	b.StopTimer()
	for i, r := range rigs {
		b.ReportMetric(pct(r.us, 0.5), r.name+"_p50_us")
		b.ReportMetric(pct(vsOff[i], 0.5), r.name+"/off_p50_med")
		b.ReportMetric(pct(vsKernel[i], 0.5), r.name+"/kernel_p50_med")
		b.ReportMetric(r.cpu/float64(max(len(r.us), 1)), r.name+"_cpu_us/trip")
	}
}

func ptr[T any](v T) *T { return &v }

// cpuUs is the process's CPU time (user and system) in microseconds: both daemons and
// both clients, and whatever else the test process runs.
func cpuUs() float64 {
	var r syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return float64(r.Utime.Sec+r.Stime.Sec)*1e6 + float64(r.Utime.Usec+r.Stime.Usec)
}

// echoTrip sends msg from sa to endpoint 1 at to and waits for its echo (echoPair): the
// round trip in microseconds.
func echoTrip(b *testing.B, ctx context.Context, sa *client.Session, to netip.AddrPort, msg []byte) float64 {
	t0 := time.Now()
	if _, err := sa.SendAsync(to, 1, msg); err != nil {
		b.Fatal(err)
	}
	m, err := sa.Recv(ctx)
	if err != nil {
		b.Fatal(err)
	}
	m.Release()
	return float64(time.Since(t0).Nanoseconds()) / 1e3
}

// echoPair opens endpoint 1 on daemons a and d (each with a 1 MiB receive ring if ring)
// and echoes every message d's session receives back to its sender until ctx ends.
func echoPair(b *testing.B, ctx context.Context, a, d *smarttd.Daemon, ring bool) (sa, sb *client.Session) {
	sa, sb = session(b, ctx, a, 1), session(b, ctx, d, 1)
	if ring {
		for _, s := range []*client.Session{sa, sb} {
			if err := s.EnableRecvRing(ctx, 1<<20); err != nil {
				b.Fatal(err)
			}
		}
	}
	clienttest.Echo(ctx, sb)
	return sa, sb
}
