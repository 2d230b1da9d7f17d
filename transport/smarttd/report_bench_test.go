package smarttd_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
	"github.com/smartt-transport/smartt/transport/udp"
	"github.com/smartt-transport/smartt/transport/udp/blast"
	"github.com/smartt-transport/smartt/transport/wire"
)

// BenchmarkDatapathReport is the datapath's side-by-side measurement, in one run
// on one veth pair (MTU 9000) between two namespaces, with the daemon's default
// configuration: rounds in which, back to back, the daemon pair (default: REPS; with
// lb: ecmp; the defaults on the AF_XDP datapath; and ECMP with the sender passing sealed
// memfds (SendFD) and the receiver on a shared-memory receive ring) moves b.N x 4 KiB
// through its API (every byte reaches a receiving client),
// iperf3 TCP runs for 2 s, and the raw UDP blaster sends b.N datagrams of the daemon's
// packet size without GSO (x/net sendmmsg/recvmmsg, 64 per call) and with GSO and GRO
// (one udp.Conn each side); then 8 and 64 connections (one daemon sending to 8 or 64
// daemons, each peer its own sender of b.N/peers x 4 KiB, 4 messages outstanding) and the
// 64-byte round trip through both daemons (clients on the socket, and on receive rings)
// beside a kernel UDP ping-pong. Goodput, CPU
// seconds of both ends per GB moved, and ratios to iperf3 are reported as metrics (medians
// over rounds); with DATAPATH_REPORT=FILE the markdown table of docs/datapath.md (min /
// median / max over rounds) is written to FILE. Run it with scripts/datapath-report.
func BenchmarkDatapathReport(b *testing.B) {
	rounds := envInt("DATAPATH_ROUNDS", 3)
	tp := nstest.Pair(b)
	iperf := hasIperf3(b)
	type row struct {
		name       string
		gbps, cpu  []float64
		extra      string
		noCPU      bool
		iperfRatio bool
	}
	var rows []*row
	get := func(name string) *row {
		for _, r := range rows {
			if r.name == name {
				return r
			}
		}
		r := &row{name: name}
		rows = append(rows, r)
		return r
	}
	def := smarttd.DefaultConfig().Transport
	defName := fmt.Sprintf("daemon pair, defaults (cc %s, lb %s, reps.run %v)", def.CC, def.LB, def.REPS.Run)
	ecmpName := fmt.Sprintf("daemon pair, lb: ecmp (cc %s)", def.CC)
	xdpName := "daemon pair, defaults but udp.datapath: afxdp"
	shmName := fmt.Sprintf("daemon pair, lb: ecmp, SendFD send + shared-memory receive ring (cc %s)", def.CC)
	xdp := func(c *smarttd.Config) { c.UDP.Datapath = "afxdp" }
	var tcp []float64
	var fair [2]struct{ agg, jain, single []float64 }
	var lat, latRing latency
	b.ResetTimer()
	for round := range rounds {
		for _, v := range []struct {
			name, lb string
			mod      func(*smarttd.Config)
			shm      bool
		}{{defName, def.LB, nil, false}, {ecmpName, "ecmp", nil, false}, {xdpName, def.LB, xdp, false}, {shmName, "ecmp", nil, true}} {
			r := runPair(b, tp, b.N, pairOpts{lb: v.lb, mod: v.mod, memfd: v.shm, ring: v.shm})
			x := get(v.name)
			x.gbps, x.cpu = append(x.gbps, r.gbps), append(x.cpu, r.cpuPerGB)
		}
		if iperf {
			res, err := blast.Iperf3Run(tp.B, tp.A, tp.AddrB, 5201, 2)
			if err != nil {
				b.Fatal(err)
			}
			x := get("iperf3, one TCP stream")
			x.gbps, x.cpu = append(x.gbps, res.Gbps), append(x.cpu, res.CPUPerGB())
			tcp = append(tcp, res.Gbps)
		}
		{
			cpu0 := cpuTime()
			_, gbps, _ := runBlaster(b, tp, b.N)
			x := get("raw UDP blaster, sendmmsg/recvmmsg x 64, no GSO")
			x.gbps, x.cpu = append(x.gbps, gbps), append(x.cpu, (cpuTime()-cpu0)/(float64(b.N)*benchPayload/1e9))
		}
		{
			cpu0 := cpuTime()
			gbps := runGSOBlaster(b, tp, b.N, round)
			x := get("raw UDP blaster, GSO + GRO, one port")
			x.gbps, x.cpu = append(x.gbps, gbps), append(x.cpu, (cpuTime()-cpu0)/(float64(b.N)*benchPayload/1e9))
		}
		for i, peers := range []int{8, 64} {
			agg, jain := runFairness(b, tp, b.N, peers)
			fair[i].agg, fair[i].jain = append(fair[i].agg, agg), append(fair[i].jain, jain)
			fair[i].single = append(fair[i].single, get(defName).gbps[round])
		}
		l := runLatency(b, tp, envInt("DATAPATH_RTTS", 4000), nil)
		lat.daemon, lat.kernel = append(lat.daemon, l.daemon...), append(lat.kernel, l.kernel...)
		l = runLatencyRing(b, tp, envInt("DATAPATH_RTTS", 4000), nil, true)
		latRing.daemon, latRing.kernel = append(latRing.daemon, l.daemon...), append(latRing.kernel, l.kernel...)
	}
	b.StopTimer()
	med := func(v []float64) float64 { return pct(v, 0.5) }
	for _, r := range rows {
		short := strings.NewReplacer(" ", "_", ",", "", "(", "", ")", "", ":", "", "/", "", "+", "").Replace(r.name)
		short = short[:min(len(short), 24)]
		b.ReportMetric(med(r.gbps), short+"_Gbit/s")
	}
	if len(tcp) > 0 {
		b.ReportMetric(med(get(defName).gbps)/med(tcp), "default/iperf3")
		b.ReportMetric(med(get(ecmpName).gbps)/med(tcp), "ecmp/iperf3")
	}
	lat.report(b)
	out := os.Getenv("DATAPATH_REPORT")
	if out == "" {
		return
	}
	var sb strings.Builder
	mmm := func(v []float64, f string) string {
		s := slices.Clone(v)
		slices.Sort(s)
		return fmt.Sprintf(f+" / "+f+" / "+f, s[0], pct(s, 0.5), s[len(s)-1])
	}
	fmt.Fprintf(&sb, "%d rounds of %d x 4 KiB (%.0f MB) per run, %s, GOMAXPROCS %d.\n\n", rounds, b.N, float64(b.N)*benchPayload/1e6,
		time.Now().UTC().Format("2006-01-02"), runtime.GOMAXPROCS(0))
	sb.WriteString("| | goodput Gbit/s min / median / max | vs iperf3 (median) | CPU s per GB, both ends, min / median / max | CPU vs iperf3 (median) |\n|---|---|---|---|---|\n")
	var tcpCPU float64
	if iperf {
		tcpCPU = med(get("iperf3, one TCP stream").cpu)
	}
	for _, r := range rows {
		ratio, cratio := "", ""
		if len(tcp) > 0 {
			ratio = fmt.Sprintf("%.2f", med(r.gbps)/med(tcp))
			cratio = fmt.Sprintf("%.2f", med(r.cpu)/tcpCPU)
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s |\n", r.name, mmm(r.gbps, "%.2f"), ratio, mmm(r.cpu, "%.2f"), cratio)
	}
	sb.WriteString("\n| connections (defaults) | aggregate Gbit/s min / median / max | vs one connection (median of per-round ratios) | Jain index min / median / max |\n|---|---|---|---|\n")
	for i, peers := range []int{8, 64} {
		var ratios []float64
		for k := range fair[i].agg {
			ratios = append(ratios, fair[i].agg[k]/fair[i].single[k])
		}
		fmt.Fprintf(&sb, "| %d | %s | %.2f | %s |\n", peers, mmm(fair[i].agg, "%.2f"), med(ratios), mmm(fair[i].jain, "%.3f"))
	}
	fmt.Fprintf(&sb, "\n| 64-byte round trip (%d per round) | p50 us | p99 us |\n|---|---|---|\n", len(lat.daemon)/rounds)
	fmt.Fprintf(&sb, "| through both daemons and clients (defaults) | %.1f | %.1f |\n", pct(lat.daemon, 0.5), pct(lat.daemon, 0.99))
	fmt.Fprintf(&sb, "| through both daemons and clients, clients on shared-memory receive rings | %.1f | %.1f |\n", pct(latRing.daemon, 0.5), pct(latRing.daemon, 0.99))
	fmt.Fprintf(&sb, "| kernel UDP ping-pong (Go sockets) | %.1f | %.1f |\n", pct(lat.kernel, 0.5), pct(lat.kernel, 0.99))
	fmt.Fprintf(&sb, "| ratio, defaults to kernel | %.2f | %.2f |\n", pct(lat.daemon, 0.5)/pct(lat.kernel, 0.5), pct(lat.daemon, 0.99)/pct(lat.kernel, 0.99))
	if err := os.WriteFile(out, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
}

func hasIperf3(b *testing.B) bool {
	if _, err := exec.LookPath("iperf3"); err != nil {
		b.Log("iperf3 not installed (apt-get install -y iperf3): no TCP comparison")
		return false
	}
	return true
}

// runGSOBlaster sends n datagrams of the daemon's packet size from A to B over udp.Conns
// with GSO and GRO (one EV: one source port) and returns the receiver's goodput.
func runGSOBlaster(b *testing.B, tp *nstest.Topo, n, round int) float64 {
	pkt := benchPayload + wire.DataHdrLen
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	base := uint16(40000 + 10*round)
	tx := nstest.Open(b, tp.A, func() (*udp.Conn, error) {
		return udp.Open(udp.Config{Listen: netip.AddrPortFrom(tp.AddrA, base), EVPortBase: base + 1, EVS: 1, SendBuffer: 16 << 20, BatchSize: 64, Logger: quiet})
	})
	rx := nstest.Open(b, tp.B, func() (*udp.Conn, error) {
		return udp.Open(udp.Config{Listen: netip.AddrPortFrom(tp.AddrB, 0), EVS: 1, RecvBuffer: 16 << 20, BatchSize: 64, Logger: quiet})
	})
	defer tx.Close()
	defer rx.Close()
	done := make(chan blast.Result, 1)
	go func() { r, _ := blast.ReceiveConn(rx, pkt, 64, n, 300*time.Millisecond); done <- r }()
	if _, err := blast.SendConn(tx, rx.LocalAddr(), pkt, 64, n, 1, time.Now().Add(30*time.Second)); err != nil {
		b.Fatal(err)
	}
	return (<-done).Gbps()
}

// runFairness moves n x 4 KiB from one daemon in A to peers daemons in B, each peer fed by
// its own sender (n/peers x 4 KiB in 1 MiB messages, 4 outstanding) and read by its own
// client, with the default configuration; it returns the aggregate goodput and the Jain
// index of the per-connection goodputs (each peer's bytes over the time its last byte
// arrived).
func runFairness(b *testing.B, tp *nstest.Topo, n, peers int) (agg, jain float64) {
	r := runFairnessWith(b, tp, n, peers, nil)
	return r.agg, r.jain
}

// fairRun is one runFairnessWith: aggregate goodput, Jain index, CPU seconds of the
// process (all daemons and clients) per GB from the first send to the last byte read, and
// the sender's engine counters per shard over the run.
type fairRun struct {
	agg, jain, cpuPerGB float64
	shards              []daemon.ShardStats
}

// runFairnessWith is runFairness with mod adjusting the sending daemon's config.
func runFairnessWith(b *testing.B, tp *nstest.Topo, n, peers int, mod func(*smarttd.Config)) fairRun {
	dir := tempDir(b)
	a := startIn(b, tp.A, netip.AddrPortFrom(tp.AddrA, 23600), dir, mod)
	defer stopDaemon(a)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	const msgSize = 1 << 20
	share := max(int64(n)*benchPayload/int64(peers), msgSize)
	type peer struct {
		addr netip.AddrPort
		d    *smarttd.Daemon
	}
	ps := make([]peer, peers)
	for i := range ps {
		ps[i].addr = netip.AddrPortFrom(tp.AddrB, uint16(30000+16*i))
		ps[i].d = startIn(b, tp.B, ps[i].addr, dir, func(c *smarttd.Config) {
			c.API.Socket = fmt.Sprintf("%s/f%d.sock", dir, i)
			c.Transport.EVS = 8 // receivers: few EV sockets each (they send only ACKs)
		})
		defer stopDaemon(ps[i].d)
	}
	s := session(b, ctx, a, 1)
	msg := make([]byte, msgSize)
	// Every receiving client is connected before the clock starts, so all senders start
	// together.
	gots := make([]<-chan error, peers)
	for i := range ps {
		gots[i] = receiveAll(b, ctx, session(b, ctx, ps[i].d, 1), share)
	}
	before := a.Node.Shards()
	cpu0 := cpuTime()
	start := time.Now()
	took := make([]float64, peers)
	var wg sync.WaitGroup
	errc := make(chan error, 2*peers)
	for i := range ps {
		got := gots[i]
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := <-got; err != nil {
				errc <- err
				return
			}
			took[i] = time.Since(start).Seconds()
		}()
		go func() { // peer i's sender
			defer wg.Done()
			var pend []*client.Pending
			for sent := int64(0); sent < share; {
				k := min(int64(msgSize), share-sent)
				if len(pend) == 4 {
					if _, err := pend[0].Wait(ctx); err != nil {
						errc <- err
						return
					}
					pend = pend[1:]
				}
				p, err := s.SendAsync(ps[i].addr, 1, msg[:k])
				if err != nil {
					errc <- err
					return
				}
				pend = append(pend, p)
				sent += k
			}
			for _, p := range pend {
				if _, err := p.Wait(ctx); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errc:
		b.Fatal(err)
	default:
	}
	el := time.Since(start).Seconds()
	cpu := cpuTime() - cpu0
	sh := a.Node.Shards()
	for i := range sh {
		sh[i].Engine.DataSent -= before[i].Engine.DataSent
		sh[i].Engine.PacketsRecv -= before[i].Engine.PacketsRecv
		sh[i].HandedOut -= before[i].HandedOut
	}
	if os.Getenv("DATAPATH_DEBUG") != "" {
		b.Logf("%d peers: per-peer completion s %v", peers, took)
	}
	var sum, sq float64
	for _, t := range took {
		g := float64(share) * 8 / t / 1e9
		sum += g
		sq += g * g
	}
	return fairRun{agg: float64(share) * float64(peers) * 8 / el / 1e9, jain: sum * sum / (float64(peers) * sq),
		cpuPerGB: cpu / (float64(share) * float64(peers) / 1e9), shards: sh}
}

// envInt is the integer in environment variable name, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
