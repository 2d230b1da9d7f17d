package smarttd_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// BenchmarkVethSocketBuffer compares the daemon's api.socket_buffer default (4 MiB) with
// the kernel's default send buffer (api.socket_buffer: 0) on the veth pair of
// BenchmarkVethDaemonVsBlaster with lb: ecmp and the clients' defaults (b.N x 4 KiB in
// 16 MiB messages, 4 outstanding, a client on the other side reading every byte from its
// socket: opted out of the automatic receive ring, which bypasses the buffer), in interleaved rounds (SOCKBUF_ROUNDS, default 5) that are sub-benchmarks, so
// take per-round ratios of goodput and the process's CPU seconds per GB. SOCKBUF_KIB
// lists other sizes (KiB, space-separated; 0 is the kernel's default), SOCKBUF_LB another
// load balancer.
func BenchmarkVethSocketBuffer(b *testing.B) {
	tp := nstest.Pair(b)
	lb := "ecmp"
	if v := os.Getenv("SOCKBUF_LB"); v != "" {
		lb = v
	}
	for round := range envInt("SOCKBUF_ROUNDS", 5) {
		for _, kib := range envInts("SOCKBUF_KIB", []int{0, 4 << 10}) {
			n := int64(kib) << 10
			b.Run(fmt.Sprintf("round=%d/socket_buffer=%d", round, n), func(b *testing.B) {
				r := runPair(b, tp, b.N, pairOpts{lb: lb, socket: true, mod: func(c *smarttd.Config) { c.API.SocketBuffer = n }})
				r.goodput(b, true)
			})
		}
	}
}
