package smarttd_test

import (
	"fmt"
	"testing"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// BenchmarkVethRecvRing compares the API's receive paths in one run with interleaved
// rounds (issue 15): the daemon pair over the veth of BenchmarkVethDaemonVsBlaster with
// lb: ecmp (GSO, where the API's copies are the gap to the blaster), b.N x 4 KiB in 16
// MiB messages, 4 outstanding, with the receiving client reading from the socket (today's
// path) or from a shared-memory receive ring (EnableRecvRing, 64 MiB), each with the
// sender streaming the message through the socket or passing it as a sealed memfd
// (SendFD); then the 64-byte round trip through both daemons and clients, beside the
// kernel's UDP ping-pong: every frame through the session's writer (api.direct_writes:
// false), the default (small frames written directly), and the default with both clients
// on rings. Rounds
// (RECVRING_ROUNDS, default 5) are sub-benchmarks; scripts/recvring-report turns the
// output into the table of docs/datapath.md (ratios to the socket path within each round).
func BenchmarkVethRecvRing(b *testing.B) {
	tp := nstest.Pair(b)
	rtts := envInt("RECVRING_RTTS", 2000)
	for round := range envInt("RECVRING_ROUNDS", 5) {
		for _, v := range []struct {
			name        string
			memfd, ring bool
		}{{"socket", false, false}, {"ring", false, true}, {"memfd", true, false}, {"memfd+ring", true, true}} {
			b.Run(fmt.Sprintf("round=%d/path=%s", round, v.name), func(b *testing.B) {
				r := runPair(b, tp, b.N, pairOpts{lb: "ecmp", memfd: v.memfd, ring: v.ring})
				b.ReportMetric(r.gbps, "daemon_Gbit/s")
				b.ReportMetric(r.cpuPerGB, "cpu_s/GB")
				b.ReportMetric(r.retxPct, "daemon_retx_%")
			})
		}
		for _, v := range []struct {
			name   string
			direct bool
			ring   bool
		}{{"writer", false, false}, {"socket", true, false}, {"ring", true, true}} {
			b.Run(fmt.Sprintf("round=%d/rtt=%s", round, v.name), func(b *testing.B) {
				l := runLatencyRing(b, tp, rtts, func(c *smarttd.Config) { c.API.DirectWrites = v.direct }, v.ring)
				l.report(b)
			})
		}
	}
}
