package smarttd_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// BenchmarkVethZeroCopy compares the bulk send path's variants of the zero-copy
// work in one run with interleaved rounds, on the veth pair of BenchmarkVethDaemonVsBlaster
// with lb: ecmp (b.N x 4 KiB, 4 messages outstanding, a client on the other side reading
// every byte from its socket): SendAsync streaming each message through the API socket
// ("stream", client.SetSendFDThreshold(0)) or copying it into one of the session's
// reusable memfds passed with SendFD ("memfd", SetSendFDThreshold(1)), for message sizes of
// ZEROCOPY_SIZES KiB (default 16384); and the engine copying each data packet's payload
// behind its header ("copy", udp.copy_payload: true) or sending header and payload as two
// iovecs, the payload from the message's buffer ("iovec", the default); and the receiving
// daemon copying each datagram out of the GRO buffer ("copy", the default) or reading it
// in place ("inplace", udp.gro_in_place: true). ZEROCOPY_VARIANTS picks some of them
// ("send/encode/gro ..."), ZEROCOPY_LB another load
// balancer. Reports goodput and the process's CPU seconds
// (both daemons and both clients) per GB; rounds (ZEROCOPY_ROUNDS, default 5) are
// sub-benchmarks, so take per-round ratios.
func BenchmarkVethZeroCopy(b *testing.B) {
	tp := nstest.Pair(b)
	sizes := envInts("ZEROCOPY_SIZES", []int{16 << 10})
	lb := "ecmp"
	if v := os.Getenv("ZEROCOPY_LB"); v != "" {
		lb = v // the REPS default path, say: ZEROCOPY_LB=reps
	}
	for round := range envInt("ZEROCOPY_ROUNDS", 5) {
		for _, kib := range sizes {
			for _, v := range zeroCopyVariants() {
				send, enc, gro := v[0], v[1], v[2]
				b.Run(fmt.Sprintf("round=%d/size=%dK/send=%s/encode=%s/gro=%s", round, kib, send, enc, gro), func(b *testing.B) {
					mod := func(c *smarttd.Config) { c.UDP.CopyPayload, c.UDP.GROInPlace = enc == "copy", gro == "inplace" }
					r := runPair(b, tp, b.N, pairOpts{lb: lb, stream: send == "stream", memfdAuto: send == "memfd", msgSize: kib << 10, mod: mod})
					r.goodput(b, true)
					b.ReportMetric(r.allocsPerMsg, "allocs/msg")
					b.ReportMetric(r.acksPerPkt, "acks/pkt")
				})
			}
		}
	}
}

// zeroCopyVariants are the (send, encode, gro) variants of BenchmarkVethZeroCopy:
// ZEROCOPY_VARIANTS, e.g. "stream/copy/copy memfd/iovec/inplace" (gro defaults to
// copy), or the four of send and encode with the GRO copy.
func zeroCopyVariants() [][3]string {
	var out [][3]string
	for _, f := range strings.Fields(os.Getenv("ZEROCOPY_VARIANTS")) {
		p := strings.Split(f, "/")
		if len(p) == 2 {
			p = append(p, "copy")
		}
		if len(p) == 3 {
			out = append(out, [3]string{p[0], p[1], p[2]})
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, send := range []string{"stream", "memfd"} {
		for _, enc := range []string{"copy", "iovec"} {
			out = append(out, [3]string{send, enc, "copy"})
		}
	}
	return out
}

// envInts is a space- or comma-separated list of positive integers from the environment,
// or def.
func envInts(name string, def []int) []int {
	var out []int
	for _, f := range strings.FieldsFunc(os.Getenv(name), func(r rune) bool { return r == ' ' || r == ',' }) {
		if v, err := strconv.Atoi(f); err == nil && v > 0 {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return def
	}
	return out
}
