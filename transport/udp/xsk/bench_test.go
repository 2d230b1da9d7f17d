//go:build linux

package xsk_test

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/udp"
	"github.com/smartt-transport/smartt/transport/udp/blast"
	"github.com/smartt-transport/smartt/transport/udp/xsk"
)

const (
	payload = 4096 // the payload
	batch   = 64
	bufSize = 16 << 20
	rounds  = 20000 // packets per variant per round
)

func cpuTime() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func plainRx(t testing.TB, ns *nstest.NS, addr netip.Addr) *net.UDPConn {
	t.Helper()
	return nstest.Open(t, ns, func() (*net.UDPConn, error) {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
		if err == nil {
			err = blast.ForceBuffers(c, bufSize, bufSize)
		}
		return c, err
	})
}

// sendXSK sends count payload-byte datagrams to dst over s, the source port cycling over
// evs ports from base, batch at a time, stopping early at until.
func sendXSK(s *xsk.Socket, h *xsk.Hop, dst uint16, base uint16, evs, count int, until time.Time) (int, error) {
	pl := make([]byte, payload)
	pk := make([]xsk.TxPacket, batch)
	ev := 0
	sent := 0
	for sent < count {
		if sent%(batch*64) == 0 && time.Now().After(until) {
			break
		}
		n := min(batch, count-sent)
		for i := range pk[:n] {
			pk[i] = xsk.TxPacket{Payload: pl, SrcPort: base + uint16(ev), DstPort: dst, TOS: udp.ECT0}
			ev = (ev + 1) % evs
		}
		k, err := s.SendUDP4(h, pk[:n])
		sent += k
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// series is one variant's per-round figures.
type series struct {
	name       string
	rate, cpu  []float64 // packets/s at the receiver; CPU s per GB (whole process: both ends)
	lost, sent int
}

// round runs recv in the background while send sends, and adds the round with the
// process's CPU time over it.
func (s *series) round(b *testing.B, recv func() blast.Result, send func() (int, error)) {
	done := make(chan blast.Result, 1)
	c0 := cpuTime()
	go func() { done <- recv() }()
	sent, err := send()
	if err != nil {
		b.Fatal(s.name, err)
	}
	s.add(<-done, sent, cpuTime()-c0)
}

func (s *series) add(r blast.Result, sent int, cpu float64) {
	s.rate = append(s.rate, r.PacketRate())
	s.cpu = append(s.cpu, cpu/max(float64(r.Bytes)/1e9, 1e-9))
	s.sent += sent
	s.lost += sent - int(r.Packets)
}

func mmm(x []float64) (lo, med, hi float64) {
	s := slices.Clone(x)
	slices.Sort(s)
	if len(s) == 0 {
		return 0, 0, 0
	}
	return s[0], s[len(s)/2], s[len(s)-1]
}

// reportAll reports every variant and, per variant, the median over rounds of its rate
// divided by base's in the same round (steadier than a ratio of medians on a busy machine).
func reportAll(b *testing.B, vs []*series, base *series) {
	for _, v := range vs {
		v.report(b)
		if v == base {
			continue
		}
		r := make([]float64, len(v.rate))
		for i := range r {
			r[i] = v.rate[i] / max(base.rate[i], 1)
		}
		_, med, _ := mmm(r)
		b.ReportMetric(med, v.name+"/"+base.name)
	}
}

func (s *series) report(b *testing.B) {
	lo, med, hi := mmm(s.rate)
	clo, cmed, chi := mmm(s.cpu)
	b.ReportMetric(med, s.name+"_pkts/s")
	b.ReportMetric(med*payload*8/1e9, s.name+"_Gbit/s")
	b.ReportMetric(cmed, s.name+"_cpu_s/GB")
	b.ReportMetric(100*float64(s.lost)/max(float64(s.sent), 1), s.name+"_loss_%")
	b.Logf("%-22s pkts/s min/median/max %8.0f %8.0f %8.0f  Gbit/s median %5.2f  CPU s/GB %.2f %.2f %.2f  loss %.2f%%",
		s.name, lo, med, hi, med*payload*8/1e9, clo, cmed, chi, 100*float64(s.lost)/max(float64(s.sent), 1))
}

// BenchmarkTxInterleaved answers "does AF_XDP beat GSO EV runs at k = 1" for
// the send side: over one veth pair (MTU 9000) between two namespaces, 4096-byte
// datagrams with a different source port (EV) per packet from an AF_XDP socket (copy
// mode, multi-buffer), against sendmmsg on 256 bound EV sockets (udp.Conn's port
// carrier) and against GSO with one port (udp.Conn, one EV); each received by a plain UDP
// socket with recvmmsg (and the GSO run also by a udp.Conn with GRO). Each iteration is one
// round of every variant in turn (20,000 datagrams each), so load that comes and goes
// hits all alike; it reports the median receive rate and CPU seconds per GB of the whole
// process (both ends; softirq work in ksoftirqd is not counted) and logs min/median/max.
// Use -benchtime=5x or more.
func BenchmarkTxInterleaved(b *testing.B) {
	tp := nstest.Pair(b)
	rx := plainRx(b, tp.B, tp.AddrB)
	dst := rx.LocalAddr().(*net.UDPAddr).AddrPort()
	s, rt := openTx(b, tp.A, tp.AddrB, xsk.Config{NoRX: true, Frames: 4096, RingSize: 4096})
	open := func(ns *nstest.NS, cfg udp.Config) *udp.Conn {
		cfg.Logger = quiet()
		return nstest.Open(b, ns, func() (*udp.Conn, error) { return udp.Open(cfg) })
	}
	port256 := open(tp.A, udp.Config{Listen: netip.AddrPortFrom(tp.AddrA, 21000), EVS: 256, SendBuffer: bufSize, BatchSize: batch})
	port1 := open(tp.A, udp.Config{Listen: netip.AddrPortFrom(tp.AddrA, 22000), EVS: 256, SendBuffer: bufSize, BatchSize: batch})
	groRx := open(tp.B, udp.Config{Listen: netip.AddrPortFrom(tp.AddrB, 0), EVS: 1, RecvBuffer: bufSize, BatchSize: batch})
	until := func() time.Time { return time.Now().Add(20 * time.Second) }
	vs := []*series{{name: "xsk-256ev"}, {name: "sendmmsg-256ev"}, {name: "gso-1ev"}, {name: "gso-1ev-gro"}}
	b.ResetTimer()
	for range b.N {
		for _, v := range vs {
			recv := func() blast.Result { r, _ := blast.Receive(rx, payload, batch, rounds, 300*time.Millisecond); return r }
			if v.name == "gso-1ev-gro" {
				recv = func() blast.Result {
					r, _ := blast.ReceiveConn(groRx, payload, batch, rounds, 300*time.Millisecond)
					return r
				}
			}
			// The receiver's 300 ms idle wait is CPU-free (blocked in recvmmsg).
			v.round(b, recv, func() (int, error) {
				switch v.name {
				case "xsk-256ev":
					return sendXSK(s, &rt.Hop, dst.Port(), 30000, 256, rounds, until())
				case "sendmmsg-256ev":
					return blast.SendConn(port256, dst, payload, batch, rounds, 256, until())
				case "gso-1ev":
					return blast.SendConn(port1, dst, payload, batch, rounds, 1, until())
				}
				return blast.SendConn(port1, groRx.LocalAddr(), payload, batch, rounds, 1, until())
			})
		}
	}
	b.StopTimer()
	reportAll(b, vs, vs[1])
	st := s.Stats()
	b.ReportMetric(float64(st.TxKicks)/max(float64(st.TxPackets), 1), "xsk_kicks/pkt")
}

// receiveXSK reads datagrams from rd until count arrived or none came for idle.
func receiveXSK(rd *xsk.RxReader, count int, idle time.Duration) blast.Result {
	pk := make([]xsk.RxPacket, batch)
	for i := range pk {
		pk[i].Buf = make([]byte, payload)
	}
	var r blast.Result
	var first, last time.Time
	for r.Packets < uint64(count) {
		k, err := rd.ReadUDP4(pk, int(idle.Milliseconds()))
		if err != nil || k == 0 {
			break
		}
		last = time.Now()
		if r.Packets == 0 {
			first = last
		}
		r.Packets += uint64(k)
		for _, p := range pk[:k] {
			r.Bytes += uint64(p.N)
		}
	}
	r.Elapsed = last.Sub(first)
	return r
}

// BenchmarkRxInterleaved is BenchmarkTxInterleaved for the receive side: 4096-byte
// datagrams with a source port per packet, sent by sendmmsg on 256 EV sockets (udp.Conn)
// or by AF_XDP, received by recvmmsg on a plain UDP socket or by an AF_XDP socket behind
// the XDP program (native XDP on the receiving veth, in its own namespace pair so the
// socket baselines run without XDP); GSO on one port into GRO for reference. Same rounds,
// figures and caveats. Use -benchtime=5x or more.
func BenchmarkRxInterleaved(b *testing.B) {
	plain := nstest.Pair(b) // no XDP anywhere
	xdp := nstest.Pair(b)   // XDP program on B's veth0 for port 23600
	const port = 23600
	s, _, _ := rxSide(b, xdp.B, port, port)
	rd := xsk.NewRxReader(s, batch)
	rx := plainRx(b, plain.B, plain.AddrB)
	open := func(ns *nstest.NS, cfg udp.Config) *udp.Conn {
		cfg.Logger = quiet()
		return nstest.Open(b, ns, func() (*udp.Conn, error) { return udp.Open(cfg) })
	}
	cfg := udp.Config{Listen: netip.AddrPortFrom(plain.AddrA, 21000), EVS: 256, SendBuffer: bufSize, BatchSize: batch}
	sockTx := open(plain.A, cfg)
	cfg.Listen = netip.AddrPortFrom(xdp.AddrA, 21000)
	sockTxX := open(xdp.A, cfg)
	groTx := open(plain.A, udp.Config{Listen: netip.AddrPortFrom(plain.AddrA, 22000), EVS: 1, SendBuffer: bufSize, BatchSize: batch})
	groRx := open(plain.B, udp.Config{Listen: netip.AddrPortFrom(plain.AddrB, 0), EVS: 1, RecvBuffer: bufSize, BatchSize: batch})
	xTx, xRt := openTx(b, plain.A, plain.AddrB, xsk.Config{NoRX: true, Frames: 4096, RingSize: 4096})
	xTxX, xRtX := openTx(b, xdp.A, xdp.AddrB, xsk.Config{NoRX: true, Frames: 4096, RingSize: 4096})
	until := func() time.Time { return time.Now().Add(20 * time.Second) }
	const idle = 300 * time.Millisecond
	vs := []*series{{name: "sendmmsg-256ev>recvmmsg"}, {name: "sendmmsg-256ev>xsk"}, {name: "xsk-256ev>recvmmsg"}, {name: "xsk-256ev>xsk"}, {name: "gso-1ev>gro"}}
	b.ResetTimer()
	for range b.N {
		for _, v := range vs {
			recv := func() blast.Result { return receiveXSK(rd, rounds, idle) }
			switch v.name {
			case "sendmmsg-256ev>recvmmsg", "xsk-256ev>recvmmsg":
				recv = func() blast.Result { r, _ := blast.Receive(rx, payload, batch, rounds, idle); return r }
			case "gso-1ev>gro":
				recv = func() blast.Result { r, _ := blast.ReceiveConn(groRx, payload, batch, rounds, idle); return r }
			}
			v.round(b, recv, func() (int, error) {
				switch v.name {
				case "sendmmsg-256ev>recvmmsg":
					return blast.SendConn(sockTx, rx.LocalAddr().(*net.UDPAddr).AddrPort(), payload, batch, rounds, 256, until())
				case "sendmmsg-256ev>xsk":
					return blast.SendConn(sockTxX, netip.AddrPortFrom(xdp.AddrB, port), payload, batch, rounds, 256, until())
				case "xsk-256ev>recvmmsg":
					return sendXSK(xTx, &xRt.Hop, rx.LocalAddr().(*net.UDPAddr).AddrPort().Port(), 30000, 256, rounds, until())
				case "xsk-256ev>xsk":
					return sendXSK(xTxX, &xRtX.Hop, port, 30000, 256, rounds, until())
				}
				return blast.SendConn(groTx, groRx.LocalAddr(), payload, batch, rounds, 1, until())
			})
		}
	}
	b.StopTimer()
	reportAll(b, vs, vs[0])
	st := rd.Stats()
	b.ReportMetric(float64(st.Malformed[xsk.BadIPHeader]+st.Malformed[xsk.BadUDPLen]+st.Truncated), "xsk_rx_refused")
}
