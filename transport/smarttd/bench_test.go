package smarttd_test

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"smartt/test/nstest"
	"smartt/transport/client"
	"smartt/transport/udp/blast"
	"smartt/transport/wire"
)

// BenchmarkVethDaemonVsBlaster compares, in one run over one veth pair (MTU 9000) between
// two namespaces: a raw UDP blaster (sendmmsg/recvmmsg, 64 per call) sending datagrams of
// the daemon's data-packet size (4096-byte payload + header), the daemon's single-connection
// goodput through its API (16 MiB messages, 4 outstanding, default config), and iperf3 TCP
// (if installed). One iteration is one 4096-byte payload; run with e.g. -benchtime=200000x.
// The daemon's result reports its packet rate as a share of the blaster's (blaster_%).
func BenchmarkVethDaemonVsBlaster(b *testing.B) {
	tp := nstest.Pair(b)
	const payload = 4096
	pkt := payload + wire.DataHdrLen
	var blasterRate float64
	b.Run("blaster", func(b *testing.B) {
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
		b.ResetTimer()
		done := make(chan blast.Result, 1)
		go func() {
			r, _ := blast.Receive(rx, pkt, 64, b.N, 300*time.Millisecond)
			done <- r
		}()
		sent, err := blast.Send(tx, dst, pkt, 64, b.N, time.Now().Add(30*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		r := <-done
		blasterRate = r.PacketRate()
		b.ReportMetric(r.PacketRate(), "pkts/s")
		b.ReportMetric(r.Gbps(), "Gbit/s")
		b.ReportMetric(100*float64(sent-int(r.Packets))/float64(max(sent, 1)), "loss_%")
	})
	b.Run("daemon", func(b *testing.B) {
		dir := tempDir(b)
		la, lb := netip.AddrPortFrom(tp.AddrA, 4791), netip.AddrPortFrom(tp.AddrB, 4791)
		a := startIn(b, tp.A, la, dir, nil)
		d := startIn(b, tp.B, lb, dir, nil)
		_ = d
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		s, err := client.New(a.Config.API.Socket).Open(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		s.Bind(ctx, 1)
		const msgSize = 16 << 20
		msg := make([]byte, msgSize)
		total := int64(b.N) * payload
		before := a.Node.Stats()
		b.ResetTimer()
		start := time.Now()
		window := make(chan *client.Pending, 4)
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
		for sent := int64(0); sent < total; {
			n := min(int64(msgSize), total-sent)
			p, err := s.SendAsync(lb, 1, msg[:n])
			if err != nil {
				b.Fatal(err)
			}
			window <- p
			sent += n
		}
		close(window)
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
		el := time.Since(start).Seconds()
		b.StopTimer()
		st := a.Node.Stats()
		pkts := float64(st.DataSent - before.DataSent)
		b.ReportMetric(pkts/el, "pkts/s")
		b.ReportMetric(float64(total)*8/el/1e9, "Gbit/s")
		retx := st.RetxSack + st.RetxNack + st.RetxTimeout - before.RetxSack - before.RetxNack - before.RetxTimeout
		b.ReportMetric(100*float64(retx)/max(pkts, 1), "retx_%")
		if blasterRate > 0 {
			b.ReportMetric(100*pkts/el/blasterRate, "blaster_%")
		}
	})
	b.Run("iperf3", func(b *testing.B) {
		if _, err := exec.LookPath("iperf3"); err != nil {
			b.Skip("iperf3 not installed (apt-get install -y iperf3)")
		}
		srv := exec.Command("iperf3", "-s", "-1", "-B", tp.AddrB.String())
		if err := tp.B.Do(func() error { return srv.Start() }); err != nil {
			b.Fatal(err)
		}
		defer srv.Process.Kill()
		time.Sleep(200 * time.Millisecond)
		secs := max(1, min(10, b.N/200000))
		out, err := tp.A.Exec("iperf3", "-c", tp.AddrB.String(), "-t", strconv.Itoa(secs), "-J")
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
		b.ReportMetric(res.End.SumReceived.BitsPerSecond/1e9, "Gbit/s")
	})
}

