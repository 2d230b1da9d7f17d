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
// daemon (local delivery: Go client A, the daemon, Go client B echoing, and back) with a
// kernel Unix stream socket ping-pong between two goroutines of the same process (the
// floor any local IPC pays), in interleaved rounds of b.N/8 round trips each. Reports
// the min, median and max over the rounds of each side's round median (microseconds)
// and of their ratio local/unix.
func BenchmarkLocalRoundTrip(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	mn := daemon.NewMemNet()
	a := startDaemon(b, mn, addrA, shortDir(b), nil)
	c := client.New(a.Config.API.Socket)
	sa, sb := openBound(b, c, 1), openBound(b, c, 2)
	clienttest.Echo(ctx, sb)
	msg := make([]byte, 64)
	local := func() float64 {
		t0 := time.Now()
		if _, err := sa.SendAsync(addrA, 2, msg); err != nil {
			b.Fatal(err)
		}
		m, err := sa.Recv(ctx)
		if err != nil {
			b.Fatal(err)
		}
		m.Release()
		return float64(time.Since(t0).Nanoseconds()) / 1e3
	}
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
		local()
		unixTrip()
	}
	b.ResetTimer()
	const rounds = 8
	var lm, um, ratio []float64
	for range rounds {
		k := max(b.N/rounds, 1)
		var l, u []float64
		for range k {
			l = append(l, local())
		}
		for range k {
			u = append(u, unixTrip())
		}
		lm, um = append(lm, quantile(l, 0.5)), append(um, quantile(u, 0.5))
		ratio = append(ratio, lm[len(lm)-1]/um[len(um)-1])
	}
	b.StopTimer()
	for _, r := range []struct {
		name string
		v    []float64
	}{{"local_us", lm}, {"unix_us", um}, {"local/unix", ratio}} {
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
