//go:build linux

package xsk_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/udp/blast"
	"github.com/smartt-transport/smartt/transport/udp/xsk"
)

// openTx resolves dst from ns and opens a send-only AF_XDP socket on the route's
// interface, skipping the test only when the kernel lacks AF_XDP.
func openTx(t testing.TB, ns *nstest.NS, dst netip.Addr, cfg xsk.Config) (*xsk.Socket, xsk.Route) {
	t.Helper()
	var rt xsk.Route
	if err := ns.Do(func() error {
		var err error
		rt, err = xsk.Resolve(nil, dst, 2*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	cfg.Ifindex = rt.Ifindex
	skipUnavailable(t, ns, cfg)
	return nstest.Open(t, ns, func() (*xsk.Socket, error) { return xsk.Open(cfg) }), rt
}

// skipUnavailable skips the test when the kernel lacks AF_XDP (the probe's reason), and
// fails it for any other probe error: on a kernel that has it, it must work.
func skipUnavailable(t testing.TB, ns *nstest.NS, cfg xsk.Config) {
	t.Helper()
	var perr error
	ns.Do(func() error { perr = xsk.Probe(cfg); return nil })
	var xe *xsk.Error
	if errors.As(perr, &xe) && xe.Step == "socket" && errors.Is(perr, syscall.EAFNOSUPPORT) {
		t.Skipf("AF_XDP unavailable: %v", perr)
	}
	if perr != nil {
		t.Fatalf("probe: %v", perr)
	}
}

// Frames we build cross the veth and arrive at a plain UDP socket with the source port,
// TOS byte and payload we chose: a wrong checksum, length or MAC would make the kernel
// drop them.
func TestSendUDP4(t *testing.T) {
	tp := nstest.Pair(t)
	rx := nstest.Open(t, tp.B, func() (*net.UDPConn, error) {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(tp.AddrB, 0)))
		if err == nil {
			err = blast.ForceBuffers(c, 16<<20, 0)
		}
		return c, err
	})
	rc := ipv4.NewPacketConn(rx)
	if err := rc.SetControlMessage(ipv4.FlagTTL|ipv4.FlagDst, true); err != nil {
		t.Fatal(err)
	}
	dport := rx.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	s, rt := openTx(t, tp.A, tp.AddrB, xsk.Config{NoRX: true, Frames: 512, RingSize: 256})
	const n = 200
	pkts := make([]xsk.TxPacket, n)
	for i := range pkts {
		pl := make([]byte, 100+i*44)
		for j := range pl {
			pl[j] = byte(i + j)
		}
		pkts[i] = xsk.TxPacket{Payload: pl, SrcPort: uint16(30000 + i), DstPort: dport, TOS: 0x28<<2 | 2}
	}
	if k, err := s.SendUDP4(&rt.Hop, pkts); k != n || err != nil {
		t.Fatalf("SendUDP4: %d, %v", k, err)
	}
	buf := make([]byte, 9000)
	rx.SetReadDeadline(time.Now().Add(2 * time.Second))
	for i := range n {
		k, cm, src, err := rc.ReadFrom(buf)
		if err != nil {
			t.Fatalf("packet %d: %v (stats %+v)", i, err, s.Stats())
		}
		ap := src.(*net.UDPAddr).AddrPort()
		want := pkts[i]
		if ap.Addr().Unmap() != tp.AddrA || ap.Port() != want.SrcPort || string(buf[:k]) != string(want.Payload) {
			t.Fatalf("packet %d from %v, %d bytes; want from %v:%d, %d bytes", i, ap, k, tp.AddrA, want.SrcPort, len(want.Payload))
		}
		if cm.TTL != 64 {
			t.Fatalf("packet %d TTL %d", i, cm.TTL)
		}
	}
	// Payloads past 4096-42 bytes span two or three frames.
	if st := s.Stats(); st.TxPackets != n || st.TxFrames <= n {
		t.Fatalf("stats %+v: want %d packets in more frames", st, n)
	}
}

// Sending allocates nothing per packet (the receiver's drops do not matter here).
func TestSendZeroAllocs(t *testing.T) {
	tp := nstest.Pair(t)
	s, rt := openTx(t, tp.A, tp.AddrB, xsk.Config{NoRX: true, Frames: 512, RingSize: 256})
	pkts := make([]xsk.TxPacket, 64)
	pl := make([]byte, 4096)
	for i := range pkts {
		pkts[i] = xsk.TxPacket{Payload: pl, SrcPort: uint16(40000 + i), DstPort: 9}
	}
	send := func() {
		if k, err := s.SendUDP4(&rt.Hop, pkts); k != len(pkts) || err != nil {
			t.Fatalf("SendUDP4: %d, %v", k, err)
		}
	}
	send()
	if n := testing.AllocsPerRun(20, send); n != 0 {
		t.Fatalf("%.1f allocations per batch of 64, want 0", n)
	}
}

// Datagrams built in place (TxBuffer) and copied ones, mixed, arrive byte-exact and in
// order; buffers lent and not sent go back (ReturnLent); once the kernel has completed
// everything every TX unit is free again: far more datagrams pass than there are units,
// so a leaked unit would show. Neither path allocates.
func TestSendInPlace(t *testing.T) {
	tp := nstest.Pair(t)
	rx := nstest.Open(t, tp.B, func() (*net.UDPConn, error) {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(tp.AddrB, 0)))
		if err == nil {
			err = blast.ForceBuffers(c, 32<<20, 0)
		}
		return c, err
	})
	dport := rx.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	s, rt := openTx(t, tp.A, tp.AddrB, xsk.Config{NoRX: true, Frames: 256, RingSize: 256, MaxDatagram: 4200})
	if free, total := s.TxUnits(); free != total || total != 128 {
		t.Fatalf("TX units %d free of %d, want 128 of 128 (two 4 KiB frames each)", free, total)
	}
	fill := func(b []byte, i int) {
		for j := range b {
			b[j] = byte(i*5 + j*3)
		}
	}
	own := make([]byte, 4200)
	pk := make([]xsk.TxPacket, 16)
	const total = 2000
	got := make(chan error, 1)
	go func() {
		buf := make([]byte, 9000)
		want := make([]byte, 4200)
		rx.SetReadDeadline(time.Now().Add(10 * time.Second))
		for i := range total {
			n, err := rx.Read(buf)
			if err != nil {
				got <- fmt.Errorf("datagram %d: %v", i, err)
				return
			}
			w := want[:100+i%4100]
			fill(w, i)
			if !bytes.Equal(buf[:n], w) {
				got <- fmt.Errorf("datagram %d: %d bytes, not the %d sent (or other bytes)", i, n, len(w))
				return
			}
		}
		got <- nil
	}()
	send := func(base int) {
		for j := range pk {
			i := base + j
			size := 100 + i%4100
			if i%3 == 0 { // built where it is sent from
				b, ok := s.TxBuffer()
				if !ok || len(b) < 4200 {
					t.Fatalf("TxBuffer: %d bytes, %v", len(b), ok)
				}
				pk[j].Payload = b[:size]
			} else {
				pk[j].Payload = own[:size]
				if j == 5 {
					s.TxBuffer() // lent, never used: ReturnLent takes it back
				}
			}
			fill(pk[j].Payload, i)
			pk[j].SrcPort, pk[j].DstPort = uint16(30000+i%100), dport
			// One at a time: the copied ones share one buffer.
			if k, err := s.SendUDP4(&rt.Hop, pk[j:j+1]); k != 1 || err != nil {
				t.Fatalf("SendUDP4 (in place %v): %d, %v", i%3 == 0, k, err)
			}
		}
		s.ReturnLent()
	}
	for base := 0; base < total; base += len(pk) {
		send(base)
		time.Sleep(100 * time.Microsecond) // let the receiver keep up (its buffer is 32 MiB)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	for try := 0; s.InFlight() > 0 && try < 1000; try++ {
		s.Kick()
		s.Reap()
		time.Sleep(time.Millisecond)
	}
	if free, all := s.TxUnits(); free != all || s.InFlight() != 0 {
		t.Fatalf("after %d datagrams: %d of %d TX units free, %d frames in flight: units leaked", total, free, all, s.InFlight())
	}
	// Zero allocations, in place and copied.
	alloc := func() {
		b, _ := s.TxBuffer()
		pk[0].Payload = b[:4096]
		pk[1].Payload = own[:4096]
		if k, err := s.SendUDP4(&rt.Hop, pk[:2]); k != 2 || err != nil {
			t.Fatalf("SendUDP4: %d, %v", k, err)
		}
		s.ReturnLent()
	}
	if n := testing.AllocsPerRun(50, alloc); n != 0 {
		t.Fatalf("%.1f allocations per two datagrams, want 0", n)
	}
}
