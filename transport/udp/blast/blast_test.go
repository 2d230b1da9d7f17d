package blast_test

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/udp"
	"github.com/smartt-transport/smartt/transport/udp/blast"
)

const (
	payload = 4096 // the default payload
	batch   = 64
	bufSize = 16 << 20
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func listenIn(t testing.TB, ns *nstest.NS, addr netip.Addr) *net.UDPConn {
	t.Helper()
	return nstest.Open(t, ns, func() (*net.UDPConn, error) {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
		if err == nil {
			err = blast.ForceBuffers(c, bufSize, bufSize)
		}
		return c, err
	})
}

func openIn(t testing.TB, ns *nstest.NS, cfg udp.Config) *udp.Conn {
	t.Helper()
	cfg.Logger = quiet()
	return nstest.Open(t, ns, func() (*udp.Conn, error) { return udp.Open(cfg) })
}

// paced receives with recv while it sends 500 packets in 10 calls of send (50 each,
// within 5 s), 1 ms apart, and returns what recv got.
func paced(t *testing.T, recv func() (blast.Result, error), send func(deadline time.Time) (int, error)) blast.Result {
	t.Helper()
	done := make(chan blast.Result, 1)
	go func() {
		r, err := recv()
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	for i := 0; i < 500; i += 50 {
		if k, err := send(time.Now().Add(5 * time.Second)); k != 50 || err != nil {
			t.Fatalf("send: %d, %v", k, err)
		}
		time.Sleep(time.Millisecond)
	}
	return <-done
}

// Small paced runs lose nothing, so both paths must deliver every byte.
func TestBlastDelivers(t *testing.T) {
	tp := nstest.Pair(t)
	rx := listenIn(t, tp.B, tp.AddrB)
	tx := listenIn(t, tp.A, tp.AddrA)
	r := paced(t, func() (blast.Result, error) { return blast.Receive(rx, payload, batch, 500, 2*time.Second) },
		func(deadline time.Time) (int, error) {
			return blast.Send(tx, rx.LocalAddr().(*net.UDPAddr).AddrPort(), payload, batch, 50, deadline)
		})
	if r.Packets != 500 || r.Bytes != 500*payload || r.PacketRate() <= 0 {
		t.Fatalf("raw: %v, want 500 packets of %d bytes", r, payload)
	}

	a := openIn(t, tp.A, udp.Config{Listen: netip.AddrPortFrom(tp.AddrA, 0), EVS: 4})
	b := openIn(t, tp.B, udp.Config{Listen: netip.AddrPortFrom(tp.AddrB, 0), EVS: 1, RecvBuffer: bufSize})
	r = paced(t, func() (blast.Result, error) { return blast.ReceiveConn(b, payload, batch, 500, 2*time.Second) },
		func(deadline time.Time) (int, error) {
			return blast.SendConn(a, b.LocalAddr(), payload, batch, 50, 4, deadline)
		})
	if r.Packets != 500 || r.Bytes != 500*payload {
		t.Fatalf("conn: %v, want 500 packets of %d bytes", r, payload)
	}
	if st := b.Stats(); st.RxECT != 500 {
		t.Fatalf("conn: %d of 500 packets arrived ECT", st.RxECT)
	}
}

// A lost datagram leaves the receiver waiting for one that never comes: it must stop at
// the idle deadline and report what did arrive (recvmmsg returns -1 with the deadline
// error, which once sliced a batch with k = -1 and crashed the benchmark).
func TestBlastLoss(t *testing.T) {
	tp := nstest.Pair(t)
	rx := listenIn(t, tp.B, tp.AddrB)
	tx := listenIn(t, tp.A, tp.AddrA)
	b := openIn(t, tp.B, udp.Config{Listen: netip.AddrPortFrom(tp.AddrB, 0), EVS: 1, RecvBuffer: bufSize})
	a := openIn(t, tp.A, udp.Config{Listen: netip.AddrPortFrom(tp.AddrA, 0), EVS: 2})
	for _, path := range []string{"raw", "conn"} {
		done := make(chan blast.Result, 1)
		go func() {
			var r blast.Result
			var err error
			if path == "raw" {
				r, err = blast.Receive(rx, payload, batch, 101, 200*time.Millisecond)
			} else {
				r, err = blast.ReceiveConn(b, payload, batch, 101, 200*time.Millisecond)
			}
			if err != nil {
				t.Errorf("%s: %v", path, err)
			}
			done <- r
		}()
		var k int
		var err error
		if path == "raw" {
			k, err = blast.Send(tx, rx.LocalAddr().(*net.UDPAddr).AddrPort(), payload, batch, 100, time.Now().Add(5*time.Second))
		} else {
			k, err = blast.SendConn(a, b.LocalAddr(), payload, batch, 100, 2, time.Now().Add(5*time.Second))
		}
		if k != 100 || err != nil {
			t.Fatalf("%s send: %d, %v", path, k, err)
		}
		select {
		case r := <-done:
			if r.Packets != 100 || r.Bytes != 100*payload || r.Elapsed < 0 {
				t.Fatalf("%s: %v, want the 100 packets sent", path, r)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: receiver did not stop at its idle deadline", path)
		}
	}
}

// BenchmarkVeth compares, in one run over one veth pair (MTU 9000) between two
// namespaces, the x/net batch blaster with udp.Conn's own batch paths, 4096-byte payloads.
// Each iteration is one datagram; use -benchtime=Nx for a fixed count. Rates are measured
// at the receiver (first to last arrival); loss_% is what the receive buffer dropped.
func BenchmarkVeth(b *testing.B) {
	tp := nstest.Pair(b)
	until := func() time.Time { return time.Now().Add(20 * time.Second) }
	report := func(b *testing.B, r blast.Result, sent int) {
		b.ReportMetric(r.PacketRate(), "pkts/s")
		b.ReportMetric(r.Gbps(), "Gbit/s")
		if sent > 0 {
			b.ReportMetric(100*float64(sent-int(r.Packets))/float64(sent), "loss_%")
		}
	}
	b.Run("xnet-raw", func(b *testing.B) {
		rx := listenIn(b, tp.B, tp.AddrB)
		tx := listenIn(b, tp.A, tp.AddrA)
		dst := rx.LocalAddr().(*net.UDPAddr).AddrPort()
		b.ReportAllocs()
		b.ResetTimer()
		done := make(chan blast.Result, 1)
		go func() {
			r, _ := blast.Receive(rx, payload, batch, b.N, 300*time.Millisecond)
			done <- r
		}()
		sent, err := blast.Send(tx, dst, payload, batch, b.N, until())
		if err != nil {
			b.Fatal(err)
		}
		report(b, <-done, sent)
	})
	for _, v := range []struct {
		name    string
		carrier string
		evs     int // EVs the sender cycles through
		v6      bool
	}{
		{"conn-port-1ev-gso", udp.CarrierPort, 1, false},
		{"conn-port-256ev", udp.CarrierPort, 256, false},
		{"conn-raw-256ev", udp.CarrierRaw, 256, false},
		{"conn-flowlabel-256ev-v6", udp.CarrierFlowLabel, 256, true},
	} {
		b.Run(v.name, func(b *testing.B) {
			src, dst := tp.AddrA, tp.AddrB
			if v.v6 {
				src, dst = tp.Addr6A, tp.Addr6B
			}
			a := openIn(b, tp.A, udp.Config{Listen: netip.AddrPortFrom(src, 19000), EVPortBase: 19100, EVS: 256, Carrier: v.carrier, SendBuffer: bufSize, BatchSize: batch})
			c := openIn(b, tp.B, udp.Config{Listen: netip.AddrPortFrom(dst, 0), EVS: 1, RecvBuffer: bufSize, BatchSize: batch})
			b.ReportAllocs()
			b.ResetTimer()
			done := make(chan blast.Result, 1)
			go func() {
				r, _ := blast.ReceiveConn(c, payload, batch, b.N, 300*time.Millisecond)
				done <- r
			}()
			sent, err := blast.SendConn(a, c.LocalAddr(), payload, batch, b.N, v.evs, until())
			if err != nil {
				b.Fatal(err)
			}
			report(b, <-done, sent)
		})
	}
}

// BenchmarkVethInterleaved is BenchmarkVeth for a busy machine: each iteration is one
// round of every variant in turn (20,000 4096-byte datagrams each), so load that comes
// and goes hits all of them alike; it reports each variant's median receive rate over the
// rounds and its ratio to the x/net blaster's, plus iperf3 TCP over the same veth (one
// second per round). Use -benchtime=5x or more.
func BenchmarkVethInterleaved(b *testing.B) {
	const count = 20000
	tp := nstest.Pair(b)
	rawRx := listenIn(b, tp.B, tp.AddrB)
	rawTx := listenIn(b, tp.A, tp.AddrA)
	type variant struct {
		name    string
		carrier string
		evs     int
		v6      bool
		noGSO   bool
		noGRO   bool
		tx, rx  *udp.Conn
		rates   []float64
	}
	vs := []*variant{
		{name: "xnet-raw"},
		{name: "conn-port-1ev-gso-gro", carrier: udp.CarrierPort, evs: 1},
		{name: "conn-port-1ev-gso", carrier: udp.CarrierPort, evs: 1, noGRO: true},
		{name: "conn-port-1ev", carrier: udp.CarrierPort, evs: 1, noGSO: true, noGRO: true},
		{name: "conn-port-256ev", carrier: udp.CarrierPort, evs: 256},
		{name: "conn-raw-256ev", carrier: udp.CarrierRaw, evs: 256},
		{name: "conn-flowlabel-256ev-v6", carrier: udp.CarrierFlowLabel, evs: 256, v6: true},
	}
	for i, v := range vs[1:] {
		src, dst := tp.AddrA, tp.AddrB
		if v.v6 {
			src, dst = tp.Addr6A, tp.Addr6B
		}
		base := uint16(19000 + 1000*i)
		v.tx = openIn(b, tp.A, udp.Config{Listen: netip.AddrPortFrom(src, base), EVPortBase: base + 1, EVS: 256, Carrier: v.carrier,
			DisableGSO: v.noGSO, SendBuffer: bufSize, BatchSize: batch})
		v.rx = openIn(b, tp.B, udp.Config{Listen: netip.AddrPortFrom(dst, 0), EVS: 1, RecvBuffer: bufSize, BatchSize: batch, DisableGRO: v.noGRO})
	}
	until := func() time.Time { return time.Now().Add(20 * time.Second) }
	if _, err := exec.LookPath("iperf3"); err != nil {
		b.Fatalf("iperf3 not installed (apt-get install -y iperf3): %v", err)
	}
	var tcp []float64 // iperf3 TCP Gbit/s per round
	b.ResetTimer()
	for range b.N {
		for _, v := range vs {
			done := make(chan blast.Result, 1)
			var err error
			if v.tx == nil {
				go func() { r, _ := blast.Receive(rawRx, payload, batch, count, 300*time.Millisecond); done <- r }()
				_, err = blast.Send(rawTx, rawRx.LocalAddr().(*net.UDPAddr).AddrPort(), payload, batch, count, until())
			} else {
				go func() { r, _ := blast.ReceiveConn(v.rx, payload, batch, count, 300*time.Millisecond); done <- r }()
				_, err = blast.SendConn(v.tx, v.rx.LocalAddr(), payload, batch, count, v.evs, until())
			}
			if err != nil {
				b.Fatal(v.name, err)
			}
			v.rates = append(v.rates, (<-done).PacketRate())
		}
		g, err := blast.Iperf3(tp.B, tp.A, tp.AddrB, 5201, 1)
		if err != nil {
			b.Fatal(err)
		}
		tcp = append(tcp, g)
	}
	b.StopTimer()
	b.ReportMetric(median(tcp), "iperf3-tcp_Gbit/s")
	raw := median(vs[0].rates)
	for _, v := range vs {
		m := median(v.rates)
		b.ReportMetric(m, v.name+"_pkts/s")
		b.ReportMetric(m*payload*8/1e9, v.name+"_Gbit/s")
		if v.tx != nil && raw > 0 {
			b.ReportMetric(m/raw, v.name+"/raw")
		}
	}
}

func median(x []float64) float64 {
	s := append([]float64(nil), x...)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
