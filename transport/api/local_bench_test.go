package api_test

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/clienttest"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/daemon"
)

// BenchmarkLocalRoundTrip compares a 64-byte round trip between two endpoints of one
// daemon over the direct path (Go client A writes to its pair, Go client B echoes over
// it) and through the daemon (A, the daemon, B echoing, and back: the direct path off)
// with a kernel Unix stream socket ping-pong between two goroutines of the same process
// (the floor any local IPC pays), in interleaved rounds of b.N/8 round trips each.
// Reports the min, median and max over the rounds of each side's round median
// (microseconds) and of the ratios direct/unix and relay/unix.
func BenchmarkLocalRoundTrip(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	mn := daemon.NewMemNet()
	a := startDaemon(b, mn, addrA, shortDir(b), nil)
	msg := make([]byte, 64)
	trip := func(c *client.Client, ep uint32) func() float64 {
		sa, sb := openBound(b, c, ep), openBound(b, c, ep+1)
		clienttest.Echo(ctx, sb)
		return func() float64 {
			t0 := time.Now()
			if _, err := sa.SendAsync(addrA, ep+1, msg); err != nil {
				b.Fatal(err)
			}
			m, err := sa.Recv(ctx)
			if err != nil {
				b.Fatal(err)
			}
			m.Release()
			return float64(time.Since(t0).Nanoseconds()) / 1e3
		}
	}
	direct := trip(client.New(a.Config.API.Socket), 1)
	off := client.New(a.Config.API.Socket)
	off.SetDirect(false)
	relay := trip(off, 3)
	p, q := unixPair(b)
	go func() { // the Unix socket's echo
		buf := make([]byte, 64)
		for {
			if _, err := io.ReadFull(q, buf); err != nil {
				return
			}
			if _, err := q.Write(buf); err != nil {
				return
			}
		}
	}()
	back := make([]byte, 64)
	unixTrip := func() float64 {
		t0 := time.Now()
		if _, err := p.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(p, back); err != nil {
			b.Fatal(err)
		}
		return float64(time.Since(t0).Nanoseconds()) / 1e3
	}
	for range 200 {
		direct()
		relay()
		unixTrip()
	}
	b.ResetTimer()
	const rounds = 8
	var dm, rm, um, dr, rr []float64
	for range rounds {
		k := max(b.N/rounds, 1)
		var d, r, u []float64
		for range k {
			d = append(d, direct())
		}
		for range k {
			r = append(r, relay())
		}
		for range k {
			u = append(u, unixTrip())
		}
		dm, rm, um = append(dm, quantile(d, 0.5)), append(rm, quantile(r, 0.5)), append(um, quantile(u, 0.5))
		dr = append(dr, dm[len(dm)-1]/um[len(um)-1])
		rr = append(rr, rm[len(rm)-1]/um[len(um)-1])
	}
	b.StopTimer()
	for _, r := range []struct {
		name string
		v    []float64
	}{{"direct_us", dm}, {"relay_us", rm}, {"unix_us", um}, {"direct/unix", dr}, {"relay/unix", rr}} {
		b.ReportMetric(quantile(r.v, 0), r.name+"_min")
		b.ReportMetric(quantile(r.v, 0.5), r.name+"_med")
		b.ReportMetric(quantile(r.v, 1), r.name+"_max")
	}
}

// unixPair is a connected pair of Unix stream sockets.
func unixPair(b *testing.B) (net.Conn, net.Conn) {
	ln, err := net.Listen("unix", shortDir(b)+"/pp.sock")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	p, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	q, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close(); q.Close() })
	return p, q
}
