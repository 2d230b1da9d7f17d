package smarttd_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// BenchmarkVethSendPath compares the API's send paths in one run with interleaved rounds,
// on the veth pair of BenchmarkVethDaemonVsBlaster with lb: ecmp:
//
//   - bulk: b.N x 4 KiB in 16 MiB messages, 4 outstanding, sent with SendAsync through the
//     former path ("copy": a chunk allocated per message and copied into, frames
//     through the session's write buffer, the daemon reading payloads through its read
//     buffer: client.SetCopySends, api.direct_reads false) and today's ("direct": frames
//     written from the caller's slice with writev, payloads read straight into the
//     message's buffer, client.SetSendFDThreshold(0)) and the default since ("memfd": each
//     message copied into a sealed memfd with one pwrite and passed by descriptor); the
//     receiving client reads from the socket either way. Goodput and CPU seconds of the
//     process (both daemons and clients) per GB.
//   - small: SENDPATH_SMALL (default 20000) messages of 64 B and of 4 KiB, one SendAsync
//     each through the old path ("copy") and today's ("direct"), and in SendBatch calls of
//     64 ("batch64"), with up to 1024 messages outstanding; messages per second and CPU
//     microseconds of the process per message.
//
// Both report the process's heap allocations per message (allocs/msg: the engine's and
// the receiving client's included).
//
// Rounds (SENDPATH_ROUNDS, default 5) are sub-benchmarks; scripts/sendpath-report turns
// the output into per-round ratios to the copy path.
func BenchmarkVethSendPath(b *testing.B) {
	tp := nstest.Pair(b)
	small := envInt("SENDPATH_SMALL", 20000)
	for round := range envInt("SENDPATH_ROUNDS", 5) {
		for _, path := range []string{"copy", "direct", "memfd"} {
			b.Run(fmt.Sprintf("round=%d/bulk/path=%s", round, path), func(b *testing.B) {
				b.ReportAllocs()
				r := runPair(b, tp, b.N, pairOpts{lb: "ecmp", copySends: path == "copy", stream: path == "direct"})
				r.goodput(b, true)
				b.ReportMetric(r.allocsPerMsg, "allocs/msg")
				b.ReportMetric(r.allocBytesPerMsg/1024, "alloc_KiB/msg")
			})
		}
		for _, size := range []int{64, 4096} {
			for _, path := range []string{"copy", "direct", "batch64"} {
				b.Run(fmt.Sprintf("round=%d/small=%d/path=%s", round, size, path), func(b *testing.B) {
					b.ReportAllocs()
					rate, cpuUs, allocs := runSmall(b, tp, small, size, path)
					b.ReportMetric(rate, "msgs/s")
					b.ReportMetric(cpuUs, "cpu_us/msg")
					b.ReportMetric(allocs, "allocs/msg")
				})
			}
		}
	}
}

// runSmall sends n messages of size bytes from a daemon in A to one in B through the
// given path (copy, direct, batch64) and returns messages per second (until the last one
// is received), the process's CPU microseconds per message and its heap allocations per
// message (both daemons and clients, the engine's included).
func runSmall(b *testing.B, tp *nstest.Topo, n, size int, path string) (rate, cpuUs, allocs float64) {
	dir := tempDir(b)
	la, lb := netip.AddrPortFrom(tp.AddrA, 23600), netip.AddrPortFrom(tp.AddrB, 23600)
	mod := func(c *smarttd.Config) {
		c.Transport.LB = "ecmp"
		c.API.DirectReads = path != "copy"
		c.API.MaxRecvQueue = 1 << 30
	}
	a, rd := startIn(b, tp.A, la, dir, mod), startIn(b, tp.B, lb, dir, mod)
	defer stopDaemon(a)
	defer stopDaemon(rd)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s, rs := session(b, ctx, a, 1), session(b, ctx, rd, 1)
	s.SetCopySends(path == "copy")
	msg := make([]byte, size)
	// Warm up: the connection is dialled and the first round trips are out of the way.
	for range 10 {
		if _, err := s.Send(ctx, lb, 1, msg); err != nil {
			b.Fatal(err)
		}
		if _, err := rs.Recv(ctx); err != nil {
			b.Fatal(err)
		}
	}
	got := receiveAll(b, ctx, rs, int64(n)*int64(size))
	const batch = 64
	batchMsgs := make([]client.BatchMsg, batch)
	for i := range batchMsgs {
		batchMsgs[i] = client.BatchMsg{To: lb, Endpoint: 1, Data: msg}
	}
	window := make(chan *client.Pending, 1024)
	errc := waitAll(ctx, window)
	cpu0 := cpuTime()
	m0, _ := mallocs()
	start := time.Now()
	pend := make([]*client.Pending, 0, batch)
	for sent := 0; sent < n; {
		if path == "batch64" {
			k := min(batch, n-sent)
			var err error
			if pend, err = s.SendBatch(pend[:0], batchMsgs[:k]); err != nil {
				b.Fatal(err)
			}
			for _, p := range pend {
				window <- p
			}
			sent += k
			continue
		}
		p, err := s.SendAsync(lb, 1, msg)
		if err != nil {
			b.Fatal(err)
		}
		window <- p
		sent++
	}
	close(window)
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	if err := <-got; err != nil {
		b.Fatal(err)
	}
	el := time.Since(start).Seconds()
	cpu := cpuTime() - cpu0
	m1, _ := mallocs()
	return float64(n) / el, cpu / float64(n) * 1e6, float64(m1-m0) / float64(n)
}
