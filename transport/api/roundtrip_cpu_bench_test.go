package api_test

import (
	"context"
	"net/netip"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/clienttest"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// BenchmarkAPIRoundTripCPU is BenchmarkAPIRoundTrip's default variant alone, with the
// process's CPU time (both daemons and both clients: user and system) and context
// switches per round trip beside its p50: on a 2-core host a round trip that costs more
// CPU than its latency waits for cores as much as for wake-ups. Sub-benchmarks: the
// daemon's defaults, and ack.complete_delay 0 (every completion ACKed at once).
func BenchmarkAPIRoundTripCPU(b *testing.B) {
	for _, v := range []struct {
		name string
		mod  func(*smarttd.Config)
	}{{"ack=default", nil}, {"ack=complete_delay_0", func(c *smarttd.Config) { c.Transport.Ack.CompleteDelay = 0 }}} {
		b.Run(v.name, func(b *testing.B) { roundTripCPU(b, v.mod) })
	}
}

// roundTripCPU is BenchmarkAPIRoundTripCPU with both daemons' configs adjusted by mod.
func roundTripCPU(b *testing.B, mod func(*smarttd.Config)) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := shortDir(b)
	mn := daemon.NewMemNet()
	la := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 9, 1}), 23600)
	lb := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 9, 2}), 23600)
	a, d := startDaemon(b, mn, la, dir, mod), startDaemon(b, mn, lb, dir, mod)
	sa, sb := openBound(b, client.New(a.Config.API.Socket), 1), openBound(b, client.New(d.Config.API.Socket), 1)
	clienttest.Echo(ctx, sb)
	msg := make([]byte, 64)
	trip := func() float64 {
		t0 := time.Now()
		sa.SendAsync(lb, 1, msg)
		m, _ := sa.Recv(ctx)
		m.Release()
		return float64(time.Since(t0).Nanoseconds()) / 1e3
	}
	for range 100 {
		trip()
	}
	var r0, r1 syscall.Rusage
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	syscall.Getrusage(0, &r0)
	b.ResetTimer()
	var us []float64
	for range b.N {
		us = append(us, trip())
	}
	b.StopTimer()
	syscall.Getrusage(0, &r1)
	runtime.ReadMemStats(&m1)
	cpu := func(r syscall.Rusage) float64 {
		return float64(r.Utime.Sec+r.Stime.Sec)*1e6 + float64(r.Utime.Usec+r.Stime.Usec)
	}
	b.ReportMetric(quantile(us, .5), "p50_us")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N), "allocs/trip")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(b.N), "B/trip")
	b.ReportMetric(float64(m1.NumGC-m0.NumGC)/float64(b.N)*1000, "GCs/1000trips")
	b.ReportMetric((cpu(r1)-cpu(r0))/float64(b.N), "cpu_us/trip")
	b.ReportMetric(float64(r1.Stime.Nano()-r0.Stime.Nano())/1e3/float64(b.N), "sys_us/trip")
	b.ReportMetric(float64(r1.Nvcsw-r0.Nvcsw)/float64(b.N), "vcsw/trip")
	b.ReportMetric(float64(r1.Nivcsw-r0.Nivcsw)/float64(b.N), "ivcsw/trip")
}
