//go:build linux

package smarttd_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/smarttd"
	"github.com/smartt-transport/smartt/transport/udp"
	"github.com/smartt-transport/smartt/transport/udp/blast"
	"github.com/smartt-transport/smartt/transport/udp/xsk"
)

func afxdp(c *smarttd.Config) { c.UDP.Datapath = udp.DatapathAFXDP }

// skipWithoutAFXDP skips only where the kernel has no AF_XDP, with the probe's reason.
func skipWithoutAFXDP(t testing.TB, ns *nstest.NS) {
	t.Helper()
	var err error
	ns.Do(func() error {
		l, e := net.InterfaceByName("veth0")
		if e == nil {
			err = xsk.Probe(xsk.Config{Ifindex: l.Index})
		}
		return e
	})
	if errors.Is(err, syscall.EAFNOSUPPORT) {
		t.Skipf("AF_XDP unavailable: %v", err)
	}
}

// Two daemons with udp.datapath afxdp run on AF_XDP (their socket layers and metrics say
// so) and move a 3 MiB message intact, its packets and ACKs around both kernels' UDP
// stacks once the neighbours are known.
func TestE2EAFXDP(t *testing.T) {
	tp := nstest.Pair(t)
	skipWithoutAFXDP(t, tp.A)
	dir := tempDir(t)
	la, lb := netip.AddrPortFrom(tp.AddrA, 23600), netip.AddrPortFrom(tp.AddrB, 23600)
	a := startIn(t, tp.A, la, dir, afxdp)
	b := startIn(t, tp.B, lb, dir, afxdp)
	for _, d := range []*smarttd.Daemon{a, b} {
		if c, ok := d.Socket.Caps().(udp.Caps); !ok || c.Datapath != udp.DatapathAFXDP {
			t.Fatalf("socket layer caps %+v: want the afxdp datapath", d.Socket.Caps())
		}
	}
	if v := metric(t, registry(a), "smartt_socket_capability", "cap", "afxdp"); v != 1 {
		t.Fatalf("smartt_socket_capability{cap=afxdp} = %v, want 1", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa, sb := session(t, ctx, a, 1), session(t, ctx, b, 1)
	// A first message sets up the connection; its first packets take the sockets while
	// the kernel resolves the neighbours.
	if _, err := sa.Send(ctx, lb, 1, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Recv(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	msg := make([]byte, 3<<20)
	rand.NewChaCha8([32]byte{7}).Read(msg)
	a0, b0 := tp.A.SNMP(t), tp.B.SNMP(t)
	if _, err := sa.Send(ctx, lb, 1, msg); err != nil {
		t.Fatal(err)
	}
	m, err := sb.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Data, msg) {
		t.Fatalf("received %d bytes, not the %d sent", len(m.Data), len(msg))
	}
	// ~770 data packets and their ACKs went around both kernels' UDP stacks.
	a1, b1 := tp.A.SNMP(t), tp.B.SNMP(t)
	for _, c := range []struct {
		what string
		n    uint64
	}{{"A's UDP stack sent", a1["Udp.OutDatagrams"] - a0["Udp.OutDatagrams"]}, {"A's received", a1["Udp.InDatagrams"] - a0["Udp.InDatagrams"]},
		{"B's sent", b1["Udp.OutDatagrams"] - b0["Udp.OutDatagrams"]}, {"B's received", b1["Udp.InDatagrams"] - b0["Udp.InDatagrams"]}} {
		if c.n != 0 {
			t.Errorf("%s %d datagrams: not all traffic went through AF_XDP", c.what, c.n)
		}
	}
}

// udp.datapath auto puts a daemon with the defaults (REPS, a new EV per packet) on
// AF_XDP on a one-queue veth with an IPv4 listen address, and one with lb ecmp on
// sockets; reps.run auto follows: 1 on AF_XDP, a GSO send's worth on sockets.
func TestDaemonDatapathAuto(t *testing.T) {
	tp := nstest.Pair(t)
	skipWithoutAFXDP(t, tp.A)
	dir := tempDir(t)
	for _, c := range []struct {
		lb, want string
		port     uint16
	}{{"reps", udp.DatapathAFXDP, 23600}, {"ecmp", udp.DatapathSockets, 23700}} {
		d := startIn(t, tp.A, netip.AddrPortFrom(tp.AddrA, c.port), dir, func(cfg *smarttd.Config) {
			cfg.UDP.Datapath = udp.DatapathAuto
			cfg.Transport.LB = c.lb
		})
		if caps, ok := d.Socket.Caps().(udp.Caps); !ok || caps.Datapath != c.want {
			t.Errorf("lb %s, datapath auto: socket layer caps %+v, want %s", c.lb, d.Socket.Caps(), c.want)
		}
		run := udp.GSORun(d.Config.MaxDatagram())
		if c.want == udp.DatapathAFXDP {
			run = 1
		}
		if d.REPSRun != run {
			t.Errorf("lb %s on %s: reps.run auto resolved to %d, want %d", c.lb, c.want, d.REPSRun, run)
		}
		stopDaemon(d)
	}
}

// BenchmarkVethAFXDP is the daemon pair of BenchmarkVethDaemonVsBlaster on UDP sockets and
// on AF_XDP (udp.datapath afxdp on both daemons), with REPS (the default) and ECMP, in
// interleaved rounds of b.N x 4096 bytes each; it reports each variant's median goodput
// and CPU seconds per GB (both daemons and clients), and logs min/median/max. Each afxdp
// round checks that A's kernel UDP stack sent and B's received under 5 % of the data
// packets (else a daemon fell back to sockets). Use e.g. -benchtime=100000x
// (fixed at 5).
func BenchmarkVethAFXDP(b *testing.B) {
	tp := nstest.Pair(b)
	skipWithoutAFXDP(b, tp.A)
	type variant struct {
		name, lb   string
		dp         string
		gbps, cpus []float64
		retx       []float64
	}
	vs := []*variant{{name: "sockets-reps", lb: "reps", dp: udp.DatapathSockets}, {name: "afxdp-reps", lb: "reps", dp: udp.DatapathAFXDP},
		{name: "sockets-ecmp", lb: "ecmp", dp: udp.DatapathSockets}, {name: "afxdp-ecmp", lb: "ecmp", dp: udp.DatapathAFXDP}}
	if only := os.Getenv("AFXDP_ONLY"); only != "" { // e.g. AFXDP_ONLY=afxdp-reps to profile one variant
		vs = slices.DeleteFunc(vs, func(v *variant) bool { return !slices.Contains(strings.Split(only, ","), v.name) })
	}
	const rounds = 5
	for range rounds {
		for _, v := range vs {
			in0, out0 := tp.B.SNMP(b)["Udp.InDatagrams"], tp.A.SNMP(b)["Udp.OutDatagrams"]
			r := runDaemon(b, tp, b.N, v.lb, false, func(c *smarttd.Config) { c.UDP.Datapath = v.dp })
			in, out := tp.B.SNMP(b)["Udp.InDatagrams"]-in0, tp.A.SNMP(b)["Udp.OutDatagrams"]-out0
			if lim := 50 + 0.05*float64(b.N); v.dp == udp.DatapathAFXDP && (float64(in) > lim || float64(out) > lim) {
				b.Fatalf("%s: A's UDP stack sent %d and B's received %d datagrams for %d data packets: not on AF_XDP", v.name, out, in, b.N)
			}
			v.gbps = append(v.gbps, r.gbps)
			v.cpus = append(v.cpus, r.cpuPerGB)
			v.retx = append(v.retx, r.retxPct)
		}
	}
	mmm := func(x []float64) (float64, float64, float64) {
		s := slices.Clone(x)
		slices.Sort(s)
		return s[0], s[len(s)/2], s[len(s)-1]
	}
	// Per-round ratios, AF_XDP over sockets for the same balancer: steadier than a ratio
	// of medians when the machine's load comes and goes.
	for i := 1; i < len(vs) && os.Getenv("AFXDP_ONLY") == ""; i += 2 {
		g, c := make([]float64, rounds), make([]float64, rounds)
		for r := range rounds {
			g[r] = vs[i].gbps[r] / max(vs[i-1].gbps[r], 1e-9)
			c[r] = vs[i].cpus[r] / max(vs[i-1].cpus[r], 1e-9)
		}
		_, gm, _ := mmm(g)
		_, cm, _ := mmm(c)
		b.ReportMetric(gm, vs[i].name+"/"+vs[i-1].name+"_goodput")
		b.ReportMetric(cm, vs[i].name+"/"+vs[i-1].name+"_cpu")
	}
	for _, v := range vs {
		glo, gmed, ghi := mmm(v.gbps)
		clo, cmed, chi := mmm(v.cpus)
		_, rmed, rhi := mmm(v.retx)
		b.ReportMetric(gmed, v.name+"_Gbit/s")
		b.ReportMetric(cmed, v.name+"_cpu_s/GB")
		b.ReportMetric(rmed, v.name+"_retx_%")
		b.Logf("%-13s goodput Gbit/s min/median/max %.2f %.2f %.2f   CPU s/GB %.2f %.2f %.2f   retransmitted %% median/max %.2f %.2f",
			v.name, glo, gmed, ghi, clo, cmed, chi, rmed, rhi)
	}
}

// BenchmarkAFXDPGoal is the goal for the AF_XDP datapath in one run: rounds (env
// AFXDP_ROUNDS, default 5) of iperf3 (one TCP stream, 2 s) and the daemon pair with the
// default configuration (REPS, a new EV per packet) moving b.N x 4 KiB on sockets, on
// AF_XDP, and on AF_XDP with the clients on SendFD and a shared-memory receive ring (the
// API's copies out of the way), back to back, the order rotating. It logs each variant's
// goodput and CPU s per GB (both daemons and clients; min/median/max), the per-round
// ratios to iperf3 and to the sockets variant. Use e.g. -benchtime=100000x -test.v.
func BenchmarkAFXDPGoal(b *testing.B) {
	tp := nstest.Pair(b)
	skipWithoutAFXDP(b, tp.A)
	if !hasIperf3(b) {
		b.Skip("needs iperf3")
	}
	type variant struct {
		name        string
		dp          string
		shm         bool // the clients on SendFD and a shared-memory receive ring
		gbps, cpus  []float64
		batch, acks []float64
	}
	vs := []*variant{{name: "sockets-reps", dp: udp.DatapathSockets}, {name: "afxdp-reps", dp: udp.DatapathAFXDP},
		{name: "afxdp-reps-shm", dp: udp.DatapathAFXDP, shm: true}}
	if b.N == 1 {
		return // the framework's first call, before the -benchtime one
	}
	rounds := envInt("AFXDP_ROUNDS", 5)
	var tcp, tcpCPU []float64
	for round := range rounds {
		res, err := blast.Iperf3Run(tp.B, tp.A, tp.AddrB, 5201, 2)
		if err != nil {
			b.Fatal(err)
		}
		tcp, tcpCPU = append(tcp, res.Gbps), append(tcpCPU, res.CPUPerGB())
		for i := range vs {
			v := vs[(i+round)%len(vs)] // rotate the order: no variant always runs first
			r := runPair(b, tp, b.N, pairOpts{lb: "reps", memfd: v.shm, ring: v.shm, mod: func(c *smarttd.Config) { c.UDP.Datapath = v.dp }})
			v.gbps, v.cpus = append(v.gbps, r.gbps), append(v.cpus, r.cpuPerGB)
			v.batch, v.acks = append(v.batch, r.sendmmsgPerPkt), append(v.acks, r.acksPerPkt)
		}
	}
	mmm := func(x []float64) (float64, float64, float64) {
		s := slices.Clone(x)
		slices.Sort(s)
		return s[0], s[len(s)/2], s[len(s)-1]
	}
	ratio := func(x, y []float64) []float64 {
		r := make([]float64, len(x))
		for i := range x {
			r[i] = x[i] / max(y[i], 1e-9)
		}
		return r
	}
	lo, med, hi := mmm(tcp)
	clo, cmed, chi := mmm(tcpCPU)
	b.Logf("%-16s goodput Gbit/s %.2f / %.2f / %.2f   CPU s/GB %.2f / %.2f / %.2f", "iperf3", lo, med, hi, clo, cmed, chi)
	ref := vs[0]
	for _, v := range vs {
		lo, med, hi := mmm(v.gbps)
		clo, cmed, chi := mmm(v.cpus)
		glo, gmed, ghi := mmm(ratio(v.gbps, tcp))
		rlo, rmed, rhi := mmm(ratio(v.cpus, tcpCPU))
		b.Logf("%-16s goodput Gbit/s %.2f / %.2f / %.2f   CPU s/GB %.2f / %.2f / %.2f   vs iperf3: goodput %.2f / %.2f / %.2f, CPU per GB %.2f / %.2f / %.2f",
			v.name, lo, med, hi, clo, cmed, chi, glo, gmed, ghi, rlo, rmed, rhi)
		_, bmed, _ := mmm(v.batch)
		_, amed, _ := mmm(v.acks)
		b.Logf("%-16s sender's write batches per data packet %.3f, ACKs per data packet %.3f (medians)", v.name, bmed, amed)
		b.ReportMetric(gmed, v.name+"/iperf3_goodput")
		b.ReportMetric(rmed, v.name+"/iperf3_cpu")
		if v != ref {
			glo, gmed, ghi := mmm(ratio(v.gbps, ref.gbps))
			rlo, rmed, rhi := mmm(ratio(v.cpus, ref.cpus))
			b.Logf("%-16s vs %s per round: goodput %.2f / %.2f / %.2f, CPU per GB %.2f / %.2f / %.2f", v.name, ref.name, glo, gmed, ghi, rlo, rmed, rhi)
		}
	}
}
