package blast_test

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"smartt/test/nstest"
	"smartt/transport/udp"
	"smartt/transport/udp/blast"
)

const (
	payload = 4096 // the default payload
	batch   = 64
	bufSize = 16 << 20
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func listenIn(t testing.TB, ns *nstest.NS, addr netip.Addr) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	if err := ns.Do(func() error {
		var err error
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
		if err == nil {
			err = blast.ForceBuffers(c, bufSize, bufSize)
		}
		return err
	}); err != nil {
		t.Fatalf("listen in %s: %v", ns.Name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func openIn(t testing.TB, ns *nstest.NS, cfg udp.Config) *udp.Conn {
	t.Helper()
	cfg.Logger = quiet()
	var c *udp.Conn
	if err := ns.Do(func() error {
		var err error
		c, err = udp.Open(cfg)
		return err
	}); err != nil {
		t.Fatalf("Open in %s: %v", ns.Name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Small paced runs lose nothing, so both paths must deliver every byte.
func TestBlastDelivers(t *testing.T) {
	tp := nstest.Pair(t)
	rx := listenIn(t, tp.B, tp.AddrB)
	tx := listenIn(t, tp.A, tp.AddrA)
	done := make(chan blast.Result, 1)
	go func() {
		r, err := blast.Receive(rx, payload, batch, 500, 2*time.Second)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	for i := 0; i < 500; i += 50 {
		if k, err := blast.Send(tx, rx.LocalAddr().(*net.UDPAddr).AddrPort(), payload, batch, 50, time.Now().Add(5*time.Second)); k != 50 || err != nil {
			t.Fatalf("Send: %d, %v", k, err)
		}
		time.Sleep(time.Millisecond)
	}
	if r := <-done; r.Packets != 500 || r.Bytes != 500*payload || r.PacketRate() <= 0 {
		t.Fatalf("raw: %v, want 500 packets of %d bytes", r, payload)
	}

	a := openIn(t, tp.A, udp.Config{Listen: netip.AddrPortFrom(tp.AddrA, 0), EVS: 4})
	b := openIn(t, tp.B, udp.Config{Listen: netip.AddrPortFrom(tp.AddrB, 0), EVS: 1, RecvBuffer: bufSize})
	go func() {
		r, err := blast.ReceiveConn(b, payload, batch, 500, 2*time.Second)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	for i := 0; i < 500; i += 50 {
		if k, err := blast.SendConn(a, b.LocalAddr(), payload, batch, 50, 4, time.Now().Add(5*time.Second)); k != 50 || err != nil {
			t.Fatalf("SendConn: %d, %v", k, err)
		}
		time.Sleep(time.Millisecond)
	}
	if r := <-done; r.Packets != 500 || r.Bytes != 500*payload {
		t.Fatalf("conn: %v, want 500 packets of %d bytes", r, payload)
	}
	if st := b.Stats(); st.RxECT != 500 {
		t.Fatalf("conn: %d of 500 packets arrived ECT", st.RxECT)
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
	for _, evs := range []int{1, 256} {
		b.Run("conn-evs"+map[int]string{1: "1", 256: "256"}[evs], func(b *testing.B) {
			a := openIn(b, tp.A, udp.Config{Listen: netip.AddrPortFrom(tp.AddrA, 0), EVS: 256, SendBuffer: bufSize, BatchSize: batch})
			c := openIn(b, tp.B, udp.Config{Listen: netip.AddrPortFrom(tp.AddrB, 0), EVS: 1, RecvBuffer: bufSize, BatchSize: batch})
			b.ReportAllocs()
			b.ResetTimer()
			done := make(chan blast.Result, 1)
			go func() {
				r, _ := blast.ReceiveConn(c, payload, batch, b.N, 300*time.Millisecond)
				done <- r
			}()
			sent, err := blast.SendConn(a, c.LocalAddr(), payload, batch, b.N, evs, until())
			if err != nil {
				b.Fatal(err)
			}
			report(b, <-done, sent)
		})
	}
}
