package smarttd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/reps"
	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/seal"
	"github.com/smartt-transport/smartt/transport/smarttd"
	"github.com/smartt-transport/smartt/transport/udp"
	"github.com/smartt-transport/smartt/transport/udp/blast"
	"github.com/smartt-transport/smartt/transport/wire"
)

// BenchmarkVethDaemonVsBlaster compares, in one run over one veth pair (MTU 9000) between
// two namespaces: a raw UDP blaster (sendmmsg/recvmmsg, 64 per call) sending b.N datagrams
// of the daemon's data-packet size (4096-byte payload + header); the daemon's
// single-connection goodput through its API moving b.N x 4096 bytes (16 MiB messages, 4
// outstanding, default config but for the load balancer: REPS sprays packets over the
// 256 EVs, ECMP keeps one, so UDP GSO can batch; memfd passes each message as a sealed memfd instead of streaming
// it through the API socket); and iperf3 TCP for 2 s (if installed). Each run measures
// all three back to back, so daemon/blaster_% is a ratio of one run on this shared machine;
// use e.g. -benchtime=300000x -count=3.
func BenchmarkVethDaemonVsBlaster(b *testing.B) {
	tp := nstest.Pair(b)
	for _, v := range []struct {
		lb    string
		memfd bool
	}{{"reps", false}, {"ecmp", false}, {"ecmp", true}} {
		name := "lb=" + v.lb
		if v.memfd {
			name += ",memfd"
		}
		b.Run(name, func(b *testing.B) {
			blasterRate, blasterGbps, loss := runBlaster(b, tp, b.N)
			r := runDaemon(b, tp, b.N, v.lb, v.memfd, nil)
			rate, gbps, retx := r.rate, r.gbps, r.retxPct
			r.report(b)
			b.ReportMetric(blasterRate, "blaster_pkts/s")
			b.ReportMetric(blasterGbps, "blaster_Gbit/s")
			b.ReportMetric(loss, "blaster_loss_%")
			b.ReportMetric(rate, "daemon_pkts/s")
			b.ReportMetric(gbps, "daemon_Gbit/s")
			b.ReportMetric(retx, "daemon_retx_%")
			if blasterRate > 0 {
				b.ReportMetric(100*rate/blasterRate, "daemon/blaster_%")
			}
			if tcp := runIperf3(b, tp); tcp > 0 {
				b.ReportMetric(tcp, "iperf3_Gbit/s")
				b.ReportMetric(100*gbps/tcp, "daemon/iperf3_%")
			}
		})
	}
}

const benchPayload = 4096

// BenchmarkVethAuth is the daemon's goodput over the veth pair of BenchmarkVethDaemonVsBlaster
// with packet authentication off, in auth mode and in encrypt mode (fabric key), for REPS
// spraying and ECMP (GSO): the modes are interleaved within each round so that the shared
// machine's load affects them alike. Use e.g. -benchtime=200000x; rounds are sub-benchmarks.
func BenchmarkVethAuth(b *testing.B) {
	tp := nstest.Pair(b)
	for round := range 3 {
		for _, lb := range []string{"reps", "ecmp"} {
			for _, mode := range []seal.Mode{seal.Off, seal.Auth, seal.Encrypt} {
				b.Run(fmt.Sprintf("round=%d/lb=%s/mode=%v", round, lb, mode), func(b *testing.B) {
					mod := func(c *smarttd.Config) {
						c.Transport.Auth.Mode = mode
						if mode != seal.Off {
							c.Transport.Auth.Key = seal.Key{0xbe, 0xef}
						}
					}
					r := runDaemon(b, tp, b.N, lb, false, mod)
					b.ReportMetric(r.rate, "daemon_pkts/s")
					r.goodput(b, false)
				})
			}
		}
	}
}

func runBlaster(b *testing.B, tp *nstest.Topo, n int) (rate, gbps, loss float64) {
	pkt := benchPayload + wire.DataHdrLen
	var rx, tx *net.UDPConn
	for _, x := range []struct {
		ns   *nstest.NS
		addr netip.Addr
		c    **net.UDPConn
	}{{tp.B, tp.AddrB, &rx}, {tp.A, tp.AddrA, &tx}} {
		if err := x.ns.Do(func() error {
			c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(x.addr, 0)))
			if err == nil {
				err = blast.ForceBuffers(c, 8<<20, 4<<20)
			}
			*x.c = c
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	defer rx.Close()
	defer tx.Close()
	dst := rx.LocalAddr().(*net.UDPAddr).AddrPort()
	done := make(chan blast.Result, 1)
	go func() {
		r, _ := blast.Receive(rx, pkt, 64, n, 300*time.Millisecond)
		done <- r
	}()
	sent, err := blast.Send(tx, dst, pkt, 64, n, time.Now().Add(30*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	r := <-done
	return r.PacketRate(), r.Gbps(), 100 * float64(sent-int(r.Packets)) / float64(max(sent, 1))
}

// BenchmarkVethEVRun is the daemon's REPS goodput over the veth pair of
// BenchmarkVethDaemonVsBlaster with EV runs of k = 1, 2, 4, 8, 16, 32 packets (reps.run, issue
// 15), interleaved within each round: CPU seconds (both daemons, user+system) per GB moved,
// sendmmsg calls and GSO sends per data packet at the sender, ACKs per data packet. Use
// e.g. -benchtime=100000x; rounds are sub-benchmarks.
func BenchmarkVethEVRun(b *testing.B) {
	tp := nstest.Pair(b)
	for round := range 3 {
		for _, k := range []int{1, 2, 4, 8, 16, 32} {
			b.Run(fmt.Sprintf("round=%d/run=%d", round, k), func(b *testing.B) {
				r := runDaemon(b, tp, b.N, "reps", false, func(c *smarttd.Config) { c.Transport.REPS.Run = reps.RunLen(k) })
				b.ReportMetric(r.rate, "daemon_pkts/s")
				r.goodput(b, false)
				r.report(b)
			})
		}
	}
}

// BenchmarkVethAckPolicy is the daemon's REPS goodput and ACKs per data packet over the
// veth pair with the legacy ACK policy (default: every 1, on_reorder) and the sprayed one
// (every 4, no on_reorder, on_ce, clean EVs), interleaved within each round.
func BenchmarkVethAckPolicy(b *testing.B) {
	tp := nstest.Pair(b)
	for round := range 3 {
		for _, policy := range []string{"legacy", "sprayed"} {
			b.Run(fmt.Sprintf("round=%d/policy=%s", round, policy), func(b *testing.B) {
				r := runDaemon(b, tp, b.N, "reps", false, func(c *smarttd.Config) {
					if policy == "sprayed" {
						a := &c.Transport.Ack
						a.Every, a.OnReorder, a.OnCE, a.CleanEVs = 4, false, true, true
						c.Transport.REPS.CleanEVs = true
					}
				})
				r.goodput(b, false)
				r.report(b)
			})
		}
	}
}

// BenchmarkVethAckBytes is the daemon's REPS goodput, CPU per GB and ACKs per data packet
// over the veth pair with the daemon's ACK policy at ack.every_bytes and ack.max_delay
// values of ACK_VARIANTS ("BYTES/DELAY ...", default "16384/10us 65536/10us 16384/50us"),
// interleaved within each of ACK_ROUNDS rounds (default 3).
func BenchmarkVethAckBytes(b *testing.B) {
	tp := nstest.Pair(b)
	variants := strings.Fields(os.Getenv("ACK_VARIANTS"))
	if len(variants) == 0 {
		variants = []string{"16384/10us", "65536/10us", "16384/50us"}
	}
	for round := range envInt("ACK_ROUNDS", 3) {
		for _, v := range variants {
			var bytes int
			var delay string
			if _, err := fmt.Sscanf(strings.Replace(v, "/", " ", 1), "%d %s", &bytes, &delay); err != nil {
				b.Fatalf("ACK_VARIANTS %q: %v", v, err)
			}
			d, err := time.ParseDuration(delay)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("round=%d/every_bytes=%d/max_delay=%s", round, bytes, delay), func(b *testing.B) {
				r := runDaemon(b, tp, b.N, "reps", false, func(c *smarttd.Config) {
					c.Transport.Ack.EveryBytes, c.Transport.Ack.MaxDelay = bytes, config.Duration(d)
				})
				r.goodput(b, false)
				r.report(b)
			})
		}
	}
}

// daemonRun is what runDaemon measured.
type daemonRun struct {
	rate, gbps, retxPct float64
	cpuPerGB            float64 // CPU seconds of the process (both daemons) per GB moved
	sendmmsgPerPkt      float64 // the sender's sendmmsg calls per data packet
	gsoPerPkt           float64 // the sender's GSO sends per data packet
	acksPerPkt          float64 // ACKs the sender received per data packet it sent
	allocsPerMsg        float64 // heap allocations of the process (both daemons and clients) per message (runPair)
	allocBytesPerMsg    float64 // and their bytes
	ringPct             float64 // messages the receiving daemon handed over in a receive ring, % (runPair)
}

// goodput reports the run's goodput and retransmission share and, with cpu, its CPU
// seconds per GB.
func (r daemonRun) goodput(b *testing.B, cpu bool) {
	b.ReportMetric(r.gbps, "daemon_Gbit/s")
	b.ReportMetric(r.retxPct, "daemon_retx_%")
	if cpu {
		b.ReportMetric(r.cpuPerGB, "cpu_s/GB")
	}
}

// report reports the run's per-packet costs.
func (r daemonRun) report(b *testing.B) {
	b.ReportAllocs()
	b.ReportMetric(r.cpuPerGB, "cpu_s/GB")
	b.ReportMetric(r.sendmmsgPerPkt, "sendmmsg/pkt")
	b.ReportMetric(r.gsoPerPkt, "gso_sends/pkt")
	b.ReportMetric(r.acksPerPkt, "acks/pkt")
}

func cpuTime() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func udpStats(d *smarttd.Daemon) udp.Stats {
	if d.Socket.Counters != nil {
		if st, ok := d.Socket.Counters().(udp.Stats); ok {
			return st
		}
	}
	return udp.Stats{}
}

// runDaemon moves n x 4096 bytes from a daemon in A to one in B; mod, if set, adjusts both
// daemons' configs.
func runDaemon(b *testing.B, tp *nstest.Topo, n int, balancer string, memfd bool, mod func(*smarttd.Config)) daemonRun {
	return runPair(b, tp, n, pairOpts{lb: balancer, memfd: memfd, mod: mod})
}

// pairOpts are the variants of runPair: the load balancer, SendFD at the sender (memfd),
// a shared-memory receive ring at the receiver (ring: EnableRecvRing, messages read in
// place), and a change to both configs. Without ring or socket the receiving client has
// its defaults: the automatic copy-out ring (client.DefaultAutoRecvRing).
type pairOpts struct {
	lb          string
	memfd, ring bool
	socket      bool // the receiver stays on its socket (client.SetAutoRecvRing(0)): the path before the automatic ring
	copySends   bool // the former send path: client.SetCopySends and api.direct_reads false
	stream      bool // SendAsync streams every message (client.SetSendFDThreshold(0)), no automatic memfd
	memfdAuto   bool // SendAsync passes every message through a session memfd (client.SetSendFDThreshold(1))
	msgSize     int  // bytes per message (0: 16 MiB)
	copyOut     bool // with ring: the receiver copies each message out of its ring before releasing it (receiveCopy)
	mod         func(*smarttd.Config)
}

// benchRing is the receive ring of the benchmarks' receiving clients: four 16 MiB messages.
const benchRing = 64 << 20

// benchWarm is how many messages runPair sends before it starts measuring.
const benchWarm = 6

// runPair moves n x 4096 bytes from a daemon in A to one in B (see pairOpts).
func runPair(b *testing.B, tp *nstest.Topo, n int, o pairOpts) daemonRun {
	balancer, memfd, mod := o.lb, o.memfd, o.mod
	if o.copySends {
		mod = func(c *smarttd.Config) {
			c.API.DirectReads = false
			if o.mod != nil {
				o.mod(c)
			}
		}
	}
	dir := tempDir(b)
	la, lb := netip.AddrPortFrom(tp.AddrA, 23600), netip.AddrPortFrom(tp.AddrB, 23600)
	a := startIn(b, tp.A, la, dir, func(c *smarttd.Config) {
		c.Transport.LB = balancer
		if mod != nil {
			mod(c)
		}
	})
	rd := startIn(b, tp.B, lb, dir, func(c *smarttd.Config) {
		if mod != nil {
			mod(c)
		}
		// The receiving client's reads are measured too; when it falls behind the network
		// the daemon queues for it (up to this much) rather than dropping messages.
		c.API.MaxRecvQueue = 1 << 30
	})
	defer stopDaemon(a)
	defer stopDaemon(rd)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s := session(b, ctx, a, 1)
	s.SetCopySends(o.copySends)
	if o.stream {
		s.SetSendFDThreshold(0)
	}
	if o.memfdAuto {
		s.SetSendFDThreshold(1)
	}
	rs := session(b, ctx, rd, 1)
	if o.socket {
		rs.SetAutoRecvRing(0)
	}
	if o.ring {
		if err := rs.EnableRecvRing(ctx, benchRing); err != nil {
			b.Fatal(err)
		}
	}
	receive := func(total int64) <-chan error {
		if o.copyOut {
			return receiveCopy(b, ctx, rs, total)
		}
		return receiveAll(b, ctx, rs, total)
	}
	msgSize := 16 << 20
	if o.msgSize > 0 {
		msgSize = o.msgSize
	}
	msg := make([]byte, msgSize)
	total := int64(n) * benchPayload
	// memfd: sealed messages made before the clock starts, passed by descriptor (no copy).
	fds := map[int64]*client.MessageFD{}
	if memfd {
		for _, k := range []int64{int64(msgSize), total % int64(msgSize)} {
			if k == 0 || fds[k] != nil {
				continue
			}
			m, err := client.NewMessageFD(k)
			if err != nil {
				b.Fatal(err)
			}
			clear(m.Data)
			m.Seal()
			defer m.Close()
			fds[k] = m
		}
	}
	// move sends total bytes in messages of msgSize, 4 outstanding, and waits until the
	// receiver has read them all.
	move := func(total int64) {
		got := receive(total)
		sendBytes(b, ctx, 4, total, msgSize, func(_ int, k int64) (*client.Pending, error) {
			if memfd {
				return s.SendFD(lb, 1, fds[k])
			}
			return s.SendAsync(lb, 1, msg[:k])
		})
		if err := <-got; err != nil {
			b.Fatal(err)
		}
	}
	// Not measured: benchWarm messages through the same sessions first, so that what a
	// session sets up once (its send memfds and automatic receive ring, their pages
	// allocated and mapped; the connection's first round trips) is not charged to the
	// steady state the run measures.
	move(benchWarm * int64(msgSize))
	api0 := rd.API.Stats()
	m0, mb0 := mallocs()
	m := startMeter(a)
	move(total)
	r := m.run(total)
	m1, mb1 := mallocs()
	msgs := float64((total + int64(msgSize) - 1) / int64(msgSize))
	r.allocsPerMsg = float64(m1-m0) / msgs
	r.allocBytesPerMsg = float64(mb1-mb0) / msgs
	r.ringPct = 100 * float64(rd.API.Stats().RingMsgs-api0.RingMsgs) / msgs
	return r
}

// meter is the sender's counters and the process's CPU time at the start of a measured
// run.
type meter struct {
	a     *smarttd.Daemon
	st    transport.Stats
	u     udp.Stats
	cpu   float64
	start time.Time
}

// startMeter starts measuring a run of sender a.
func startMeter(a *smarttd.Daemon) meter {
	return meter{a: a, st: a.Node.Stats(), u: udpStats(a), cpu: cpuTime(), start: time.Now()}
}

// run returns the rates of a run that moved total bytes since m started.
func (m meter) run(total int64) daemonRun {
	el := time.Since(m.start).Seconds()
	cpu := cpuTime() - m.cpu
	st, ust, before := m.a.Node.Stats(), udpStats(m.a), m.st
	pkts := float64(st.DataSent - before.DataSent)
	retx := float64(st.RetxSack + st.RetxNack + st.RetxTimeout - before.RetxSack - before.RetxNack - before.RetxTimeout)
	return daemonRun{
		rate: pkts / el, gbps: float64(total) * 8 / el / 1e9, retxPct: 100 * retx / max(pkts, 1),
		cpuPerGB:       cpu / (float64(total) / 1e9),
		sendmmsgPerPkt: float64(ust.TxBatches-m.u.TxBatches) / max(pkts, 1),
		gsoPerPkt:      float64(ust.TxGSOMessages-m.u.TxGSOMessages) / max(pkts, 1),
		acksPerPkt:     float64(st.AcksRecv-before.AcksRecv) / max(pkts, 1),
	}
}

// mallocs returns the process's heap allocations so far and their bytes.
func mallocs() (n, bytes uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs, ms.TotalAlloc
}

// receiveAll reads messages on s until total bytes have arrived (the receiving
// application's share of the work counts: every byte reaches a client), then reports on
// the returned channel.
func receiveAll(b *testing.B, ctx context.Context, s *client.Session, total int64) <-chan error {
	return receiveEach(ctx, s, total, nil)
}

// receiveEach is receiveAll handing each message to each, if not nil, before releasing
// it.
func receiveEach(ctx context.Context, s *client.Session, total int64, each func(m *client.Message)) <-chan error {
	done := make(chan error, 1)
	go func() {
		for n := int64(0); n < total; {
			m, err := s.Recv(ctx)
			if err != nil {
				done <- fmt.Errorf("receiver: %v after %d of %d bytes", err, n, total)
				return
			}
			n += int64(m.Size)
			if each != nil {
				each(m)
			}
			m.Release()
		}
		done <- nil
	}()
	return done
}

// sendBytes sends total bytes in messages of at most msgSize (message i of k bytes by
// send), at most outstanding of them unfinished, and waits until every one is sent.
func sendBytes(b *testing.B, ctx context.Context, outstanding int, total int64, msgSize int, send func(i int, k int64) (*client.Pending, error)) {
	window := make(chan *client.Pending, outstanding)
	errc := waitAll(ctx, window)
	for sent, i := int64(0), 0; sent < total; i++ {
		k := min(int64(msgSize), total-sent)
		p, err := send(i, k)
		if err != nil {
			b.Fatal(err)
		}
		window <- p
		sent += k
	}
	close(window)
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}

// waitAll waits for every Pending sent on window, in order, until window is closed, and
// then yields the first error (nil if every message was sent).
func waitAll(ctx context.Context, window <-chan *client.Pending) <-chan error {
	errc := make(chan error, 1)
	go func() {
		var first error
		for p := range window {
			if _, err := p.Wait(ctx); err != nil && first == nil {
				first = err
			}
		}
		errc <- first
	}()
	return errc
}

// receiveCopy is receiveAll for a session on a receive ring whose messages are copied out
// of the ring into one reused buffer before their release: what a client would do to give
// Recv's callers buffers of their own (the socket path's semantics) over a ring.
func receiveCopy(b *testing.B, ctx context.Context, s *client.Session, total int64) <-chan error {
	var own []byte
	return receiveEach(ctx, s, total, func(m *client.Message) {
		if cap(own) < len(m.Data) {
			own = make([]byte, len(m.Data))
		}
		copy(own, m.Data)
	})
}

// BenchmarkVethRingCopyOut compares, with lb: ecmp and the clients' defaults, the
// receiving client on its socket (opted out: SetAutoRecvRing(0), the default before the
// automatic ring) with its default, the automatic ring that copies each message out
// before releasing it (a 64 MiB ring for the 16 MiB messages, set up when the first one
// arrives), in interleaved rounds (RINGCOPY_ROUNDS, default 4) that are sub-benchmarks.
// RINGCOPY_VARIANTS lists others: "manual" is the measurement that led to the automatic
// ring (EnableRecvRing of 64 MiB, each message copied out by the application into one
// reused buffer, receiveCopy). ring_msgs_% is the share of messages that came through a
// ring.
func BenchmarkVethRingCopyOut(b *testing.B) {
	tp := nstest.Pair(b)
	variants := strings.Fields(os.Getenv("RINGCOPY_VARIANTS"))
	if len(variants) == 0 {
		variants = []string{"socket", "auto"}
	}
	for round := range envInt("RINGCOPY_ROUNDS", 4) {
		for _, v := range variants {
			o := pairOpts{lb: "ecmp"}
			switch v {
			case "socket":
				o.socket = true
			case "auto":
			case "manual":
				o.ring, o.copyOut = true, true
			default:
				b.Fatalf("RINGCOPY_VARIANTS: unknown %q (socket, auto, manual)", v)
			}
			b.Run(fmt.Sprintf("round=%d/recv=%s", round, v), func(b *testing.B) {
				r := runPair(b, tp, b.N, o)
				r.goodput(b, true)
				b.ReportMetric(r.ringPct, "ring_msgs_%")
			})
		}
	}
}

// runIperf3 returns iperf3's TCP goodput from A to B in Gbit/s (0 if iperf3 is missing).
func runIperf3(b *testing.B, tp *nstest.Topo) float64 {
	if _, err := exec.LookPath("iperf3"); err != nil {
		b.Log("iperf3 not installed (apt-get install -y iperf3): no TCP comparison")
		return 0
	}
	srv := exec.Command("iperf3", "-s", "-1", "-B", tp.AddrB.String())
	if err := tp.B.Do(func() error { return srv.Start() }); err != nil {
		b.Fatal(err)
	}
	defer srv.Process.Kill()
	time.Sleep(200 * time.Millisecond)
	out, err := tp.A.Exec("iperf3", "-c", tp.AddrB.String(), "-t", "2", "-J")
	if err != nil {
		b.Fatal(err)
	}
	srv.Wait()
	var res struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		b.Fatalf("iperf3 output: %v\n%s", err, strings.TrimSpace(string(out)))
	}
	return res.End.SumReceived.BitsPerSecond / 1e9
}

// BenchmarkVethGather is the goodput of one daemon in A sending to 8 daemons in B (8
// connections, messages round-robin over them, 4 outstanding per peer) with the send
// batches as the engine polls them and gathered by (destination, EV) (udp.gather_batch),
// for ECMP (one EV per connection) and REPS with runs of 16 and 1, interleaved within
// each round. Use e.g. -benchtime=100000x; rounds are sub-benchmarks.
func BenchmarkVethGather(b *testing.B) {
	tp := nstest.Pair(b)
	for round := range 3 {
		for _, lb := range []string{"ecmp", "reps16", "reps1"} {
			for _, gather := range []bool{false, true} {
				b.Run(fmt.Sprintf("round=%d/lb=%s/gather=%v", round, lb, gather), func(b *testing.B) {
					r := runDaemonMulti(b, tp, b.N, 8, func(c *smarttd.Config) {
						c.UDP.GatherBatch = gather
						switch lb {
						case "ecmp":
							c.Transport.LB = "ecmp"
						case "reps16":
							c.Transport.LB, c.Transport.REPS.Run = "reps", 16
						default:
							c.Transport.LB, c.Transport.REPS.Run = "reps", 1
						}
					})
					r.goodput(b, false)
					r.report(b)
				})
			}
		}
	}
}

// runDaemonMulti moves n x 4096 bytes from a daemon in A to peers daemons in B; mod
// adjusts A's config.
func runDaemonMulti(b *testing.B, tp *nstest.Topo, n, peers int, mod func(*smarttd.Config)) daemonRun {
	dir := tempDir(b)
	a := startIn(b, tp.A, netip.AddrPortFrom(tp.AddrA, 23600), dir, mod)
	var dsts []netip.AddrPort
	var rds []*smarttd.Daemon
	for i := range peers {
		d := netip.AddrPortFrom(tp.AddrB, uint16(30000+1000*i))
		rds = append(rds, startIn(b, tp.B, d, dir, func(c *smarttd.Config) { c.API.Socket = fmt.Sprintf("%s/b%d.sock", dir, i) }))
		dsts = append(dsts, d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s := session(b, ctx, a, 1)
	const msgSize = 4 << 20
	msg := make([]byte, msgSize)
	total := int64(n) * benchPayload
	var gots []<-chan error
	for i, rd := range rds {
		share := int64(0) // messages go round-robin: peer i gets messages i, i+peers, ...
		for sent, j := int64(0), 0; sent < total; j++ {
			k := min(int64(msgSize), total-sent)
			if j%peers == i {
				share += k
			}
			sent += k
		}
		if share > 0 {
			gots = append(gots, receiveAll(b, ctx, session(b, ctx, rd, 1), share))
		}
	}
	m := startMeter(a)
	sendBytes(b, ctx, 4*peers, total, msgSize, func(i int, k int64) (*client.Pending, error) {
		return s.SendAsync(dsts[i%peers], 1, msg[:k])
	})
	for _, got := range gots {
		if err := <-got; err != nil {
			b.Fatal(err)
		}
	}
	return m.run(total)
}
