package api_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/clienttest"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// BenchmarkAPIRoundTrip is the daemon's share of a small message's round trip: a 64-byte
// message from client A through daemon A, an in-memory network (no kernel UDP), daemon B
// to an echoing client B and back, so what it measures is the API, the engine and the
// goroutine hand-offs between them. Variants, interleaved in rounds of b.N/8 round trips
// (the shared machine's load affects them alike): every frame to a client through its
// session's writer (api.direct_writes: false), the default (small received messages and
// Sent frames written directly by the goroutine that has them), and the default with
// both clients receiving through shared-memory rings, and the default with both clients
// busy-polling in Recv for 50 us (Session.SetBusyPoll), and the default with
// ack.complete_delay off (every completion ACKed at once) and at 500 us (the ACK waits for
// the answer and rides in its batch). Reports p50/p99 in microseconds, the p50 ratios of
// the per-round medians, and for the complete_delay variants the share of round trips
// whose two ACKs rode with the answers (acks_rode per message received).
func BenchmarkAPIRoundTrip(b *testing.B) {
	type variant struct {
		name   string
		direct bool
		ring   bool
		poll   time.Duration
		hold   config.Duration // ack.complete_delay; -1: the daemon's default
		sa, sb *client.Session
		da, db *smarttd.Daemon
		to     netip.AddrPort
		us     []float64
		p50s   []float64
	}
	vs := []*variant{{name: "writer", direct: false, hold: -1}, {name: "direct", direct: true, hold: -1},
		{name: "direct+ring", direct: true, ring: true, hold: -1},
		{name: "direct+busypoll", direct: true, poll: 50 * time.Microsecond, hold: -1},
		{name: "direct+hold0", direct: true, hold: 0}, {name: "direct+hold500us", direct: true, hold: 500_000}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := shortDir(b)
	for i, v := range vs {
		mn := daemon.NewMemNet()
		la := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i), 1}), 23600)
		lb := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i), 2}), 23600)
		mod := func(c *smarttd.Config) {
			c.API.DirectWrites = v.direct
			if v.hold >= 0 {
				c.Transport.Ack.CompleteDelay = v.hold
			}
		}
		a, d := startDaemon(b, mn, la, dir, mod), startDaemon(b, mn, lb, dir, mod)
		v.da, v.db = a, d
		v.sa, v.sb, v.to = openBound(b, client.New(a.Config.API.Socket), 1), openBound(b, client.New(d.Config.API.Socket), 1), lb
		if v.ring {
			for _, s := range []*client.Session{v.sa, v.sb} {
				if err := s.EnableRecvRing(ctx, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
		}
		v.sa.SetBusyPoll(v.poll)
		v.sb.SetBusyPoll(v.poll)
		clienttest.Echo(ctx, v.sb)
	}
	msg := make([]byte, 64)
	trip := func(v *variant) float64 {
		t0 := time.Now()
		if _, err := v.sa.SendAsync(v.to, 1, msg); err != nil {
			b.Fatal(err)
		}
		m, err := v.sa.Recv(ctx)
		if err != nil {
			b.Fatal(err)
		}
		m.Release()
		return float64(time.Since(t0).Nanoseconds()) / 1e3
	}
	for _, v := range vs { // connections and first contact out of the way
		for range 50 {
			trip(v)
		}
	}
	st0 := make([]transport.Stats, len(vs))
	for i, v := range vs {
		st0[i] = ackStats(v.da, v.db)
	}
	b.ResetTimer()
	const rounds = 8
	for range rounds {
		k := max(b.N/rounds, 1)
		for _, v := range vs {
			var round []float64
			for range k {
				round = append(round, trip(v))
			}
			v.us = append(v.us, round...)
			v.p50s = append(v.p50s, quantile(round, 0.5))
		}

	}
	b.StopTimer()
	for _, v := range vs {
		b.ReportMetric(quantile(v.us, 0.5), v.name+"_p50_us")
		b.ReportMetric(quantile(v.us, 0.99), v.name+"_p99_us")
	}
	for i, v := range vs {
		if v.hold >= 0 {
			st := ackStats(v.da, v.db)
			b.ReportMetric(float64(st.AcksRode-st0[i].AcksRode)/float64(max(st.MsgsDelivered-st0[i].MsgsDelivered, 1)), v.name+"_rode/msg")
		}
	}
	for _, v := range vs[1:] {
		var ratios []float64
		for i := range v.p50s {
			ratios = append(ratios, v.p50s[i]/vs[0].p50s[i])
		}
		b.ReportMetric(quantile(ratios, 0.5), fmt.Sprintf("%s/writer_p50", v.name))
	}
}

// ackStats sums the engine counters of two daemons.
func ackStats(a, b *smarttd.Daemon) transport.Stats {
	s, t := a.Node.Stats(), b.Node.Stats()
	daemon.AddStats(&s, &t)
	return s
}

// quantile returns the q-quantile of v (nearest rank).
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
