//go:build linux

package xsk_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/smartt-transport/smartt/test/nstest"
	"github.com/smartt-transport/smartt/transport/udp/xsk"
)

// rxSide attaches the XDP program for ports lo..hi to B's veth0 and binds an AF_XDP
// socket to its queue 0; both go away when the test ends, also on failure.
func rxSide(t testing.TB, ns *nstest.NS, lo, hi uint16) (*xsk.Socket, *xsk.Program, int) {
	t.Helper()
	return rxSideMode(t, ns, lo, hi, xsk.ModeAuto)
}

func rxSideMode(t testing.TB, ns *nstest.NS, lo, hi uint16, mode string) (*xsk.Socket, *xsk.Program, int) {
	t.Helper()
	ifindex := ns.Interface(t, "veth0").Index
	cfg := xsk.Config{Ifindex: ifindex, NoTX: true, Frames: 4096, RingSize: 4096}
	skipUnavailable(t, ns, cfg)
	p := nstest.Open(t, ns, func() (*xsk.Program, error) { return xsk.AttachMode(ifindex, lo, hi, 1, mode) })
	s := nstest.Open(t, ns, func() (*xsk.Socket, error) { return xsk.Open(cfg) })
	if err := p.Register(0, s); err != nil {
		t.Fatal(err)
	}
	return s, p, ifindex
}

func readN(t testing.TB, rd *xsk.RxReader, n int, idle time.Duration) []xsk.RxPacket {
	t.Helper()
	var out []xsk.RxPacket
	pk := make([]xsk.RxPacket, 64)
	for i := range pk {
		pk[i].Buf = make([]byte, 9000)
	}
	for len(out) < n {
		k, err := rd.ReadUDP4(pk, int(idle.Milliseconds()))
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			break
		}
		for _, p := range pk[:k] {
			q := p
			q.Buf = append([]byte(nil), p.Buf[:p.N]...)
			out = append(out, q)
		}
	}
	return out
}

// The XDP program steers UDP to the port range into the AF_XDP socket, whole (payloads
// that span three frames included) with source, TOS and bytes intact, and passes other
// ports to the kernel's sockets; ARP keeps working (the senders resolve B first).
func TestRedirect(t *testing.T) {
	for _, mode := range []string{xsk.ModeNative, xsk.ModeGeneric} {
		t.Run(mode, func(t *testing.T) { testRedirect(t, mode) })
	}
}

func testRedirect(t *testing.T, mode string) {
	tp := nstest.Pair(t)
	const port = 23600
	s, p, _ := rxSideMode(t, tp.B, port, port+3, mode)
	if p.Mode != mode {
		t.Fatalf("attached in %q mode, asked for %q", p.Mode, mode)
	}
	other := plainRx(t, tp.B, tp.AddrB)
	tx := nstest.Open(t, tp.A, func() (*net.UDPConn, error) {
		return net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(tp.AddrA, 0)))
	})
	sizes := []int{1, 100, 3000, 4096, 8000, 8900}
	for i, n := range sizes {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(i*7 + j)
		}
		if _, err := tx.WriteToUDPAddrPort(b, netip.AddrPortFrom(tp.AddrB, port+uint16(i%4))); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.WriteToUDPAddrPort(b, other.LocalAddr().(*net.UDPAddr).AddrPort()); err != nil {
			t.Fatal(err)
		}
	}
	rd := xsk.NewRxReader(s, 64)
	got := readN(t, rd, len(sizes), time.Second)
	if len(got) != len(sizes) {
		t.Fatalf("AF_XDP socket got %d datagrams, want %d (stats %+v)", len(got), len(sizes), rd.Stats())
	}
	from := tx.LocalAddr().(*net.UDPAddr).AddrPort()
	for i, g := range got {
		if g.N != sizes[i] || g.Src != from || g.Dst != netip.AddrPortFrom(tp.AddrB, port+uint16(i%4)) {
			t.Fatalf("datagram %d: %d bytes %v -> %v, want %d bytes %v -> port %d", i, g.N, g.Src, g.Dst, sizes[i], from, port+i%4)
		}
		for j, c := range g.Buf {
			if c != byte(i*7+j) {
				t.Fatalf("datagram %d byte %d: %d", i, j, c)
			}
		}
	}
	other.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 9000)
	for i := range sizes {
		if n, _, err := other.ReadFromUDPAddrPort(buf); err != nil || n != sizes[i] {
			t.Fatalf("passed datagram %d: %d bytes, %v; want %d", i, n, err, sizes[i])
		}
	}
}

// Frames from the network are untrusted: a bad IP checksum, a UDP length past the IP
// length and a runt are counted by reason and dropped, and the good frame between them
// still arrives.
func TestMalformedCounted(t *testing.T) {
	tp := nstest.Pair(t)
	const port = 23700
	s, _, _ := rxSide(t, tp.B, port, port)
	tx, rt := openTx(t, tp.A, tp.AddrB, xsk.Config{NoRX: true, Frames: 64, RingSize: 64})
	good := xsk.TxPacket{Payload: make([]byte, 64), SrcPort: 40000, DstPort: port, TOS: 2}
	// Each frame is built as SendUDP4 would, patched, and queued by hand.
	send := func(patch func(f []byte) []byte) {
		addr, buf, ok := tx.Frame()
		if !ok {
			t.Fatal("no TX frame")
		}
		xsk.PutUDP4(buf, &rt.Hop, good.SrcPort, good.DstPort, good.TOS, len(good.Payload))
		f := patch(buf[:xsk.HeaderLen+len(good.Payload)])
		tx.Queue(addr, len(f), false)
		if err := tx.Kick(); err != nil {
			t.Fatal(err)
		}
	}
	send(func(f []byte) []byte { f[14+10] ^= 0xff; return f }) // IP checksum
	send(func(f []byte) []byte {                               // UDP length 9 bytes past the datagram
		binary.BigEndian.PutUint16(f[34+4:], uint16(8+len(good.Payload)+9))
		return f
	})
	send(func(f []byte) []byte { return f }) // good
	send(func(f []byte) []byte {             // IP total length past the frame (checksum fixed up)
		binary.BigEndian.PutUint16(f[14+2:], 2000)
		f[24], f[25] = 0, 0
		binary.BigEndian.PutUint16(f[24:], csum(f[14:34]))
		return f
	})
	rd := xsk.NewRxReader(s, 64)
	got := readN(t, rd, 1, 500*time.Millisecond)
	st := rd.Stats()
	if len(got) != 1 || got[0].N != len(good.Payload) || got[0].TOS != 2 {
		t.Fatalf("got %d datagrams %+v, want the one good one (stats %+v)", len(got), got, st)
	}
	// The reads after the good one may lag: wait for the last refusal.
	readN(t, rd, 1, 200*time.Millisecond)
	st = rd.Stats()
	if st.Malformed[xsk.BadIPHeader] != 2 || st.Malformed[xsk.BadUDPLen] != 1 || st.Packets != 1 {
		t.Fatalf("stats %+v: want 2 bad IP headers, 1 bad UDP length, 1 packet", st)
	}
}

func csum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// Closing the program detaches it: the interface has no XDP program afterwards.
func TestDetachOnClose(t *testing.T) {
	tp := nstest.Pair(t)
	_, p, ifindex := rxSide(t, tp.B, 23800, 23800)
	attached := func() bool {
		var on bool
		if err := tp.B.Do(func() error {
			l, err := netlink.LinkByIndex(ifindex)
			if err == nil && l.Attrs().Xdp != nil {
				on = l.Attrs().Xdp.Attached
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return on
	}
	if !attached() {
		t.Fatal("no XDP program on the interface after Attach")
	}
	if err := p.Close(); err != nil { // from this goroutine's thread, outside the namespace
		t.Fatal(err)
	}
	if attached() {
		t.Fatal("XDP program still attached after Close")
	}
}

// Receiving (wait, parse, copy out or join in place, refill) allocates nothing per packet.
func TestRxZeroAllocs(t *testing.T) {
	tp := nstest.Pair(t)
	const port = 23900
	s, _, _ := rxSide(t, tp.B, port, port)
	tx, rt := openTx(t, tp.A, tp.AddrB, xsk.Config{NoRX: true, Frames: 512, RingSize: 256})
	out := make([]xsk.TxPacket, 64)
	for i := range out {
		out[i] = xsk.TxPacket{Payload: make([]byte, 4096), SrcPort: uint16(41000 + i), DstPort: port}
	}
	in := make([]xsk.RxPacket, 64)
	store := make([][]byte, len(in))
	for i := range in {
		store[i] = make([]byte, 4096)
	}
	rd := xsk.NewRxReader(s, 64)
	read := rd.ReadUDP4
	round := func() {
		if k, err := tx.SendUDP4(&rt.Hop, out); k != len(out) || err != nil {
			t.Fatalf("SendUDP4: %d, %v", k, err)
		}
		for got := 0; got < len(out); {
			for i := range in {
				in[i].Buf = store[i]
			}
			k, err := read(in, 1000)
			if err != nil || k == 0 {
				t.Fatalf("ReadUDP4: %d, %v after %d (stats %+v)", k, err, got, rd.Stats())
			}
			got += k
		}
	}
	round()
	if n := testing.AllocsPerRun(20, round); n != 0 {
		t.Fatalf("%.1f allocations per 64-packet round, want 0", n)
	}
	read = rd.ReadUDP4InPlace
	round()
	if n := testing.AllocsPerRun(20, round); n != 0 {
		t.Fatalf("in place: %.1f allocations per 64-packet round, want 0", n)
	}
}

// Packets of one to three frames, read into fewer slots than are waiting: nothing the
// reader had no room for is lost (it stays on the ring), and all arrive in order.
func TestReadMixedSizes(t *testing.T) {
	tp := nstest.Pair(t)
	const port = 23600
	s, _, _ := rxSide(t, tp.B, port, port)
	tx, rt := openTx(t, tp.A, tp.AddrB, xsk.Config{NoRX: true})
	var out []xsk.TxPacket
	for i := range 200 {
		out = append(out, xsk.TxPacket{Payload: make([]byte, 100+i*83%8000), SrcPort: uint16(1000 + i), DstPort: port})
	}
	for i := 0; i < len(out); i += 16 {
		if k, err := tx.SendUDP4(&rt.Hop, out[i:min(len(out), i+16)]); err != nil || k != min(16, len(out)-i) {
			t.Fatalf("SendUDP4: %d, %v", k, err)
		}
	}
	rd := xsk.NewRxReader(s, 20)
	pk := make([]xsk.RxPacket, 7)
	for i := range pk {
		pk[i].Buf = make([]byte, 9000)
	}
	got := 0
	for got < len(out) {
		k, err := rd.ReadUDP4(pk, 1000)
		if err != nil || k == 0 {
			t.Fatalf("ReadUDP4 after %d of %d: %d, %v (stats %+v)", got, len(out), k, err, rd.Stats())
		}
		for _, p := range pk[:k] {
			if w := out[got]; int(p.Src.Port()) != int(w.SrcPort) || p.N != len(w.Payload) {
				t.Fatalf("datagram %d: port %d, %d bytes; want port %d, %d bytes", got, p.Src.Port(), p.N, w.SrcPort, len(w.Payload))
			}
			got++
		}
	}
	if ks, err := s.KernelStats(); err != nil || ks.Rx_dropped+ks.Rx_ring_full != 0 {
		t.Fatalf("kernel stats %+v, %v", ks, err)
	}
}

// In-place reads deliver every datagram byte-exact, in order, most of them as views into
// the UMEM (two-frame packets joined where their frames are neighbours), and give every
// frame back: far more packets pass than the socket has frames, so a leaked frame would
// starve the fill ring and lose packets.
func TestReadInPlace(t *testing.T) {
	tp := nstest.Pair(t)
	const port = 23600
	ifindex := tp.B.Interface(t, "veth0").Index
	cfg := xsk.Config{Ifindex: ifindex, NoTX: true, Frames: 1024, RingSize: 1024}
	skipUnavailable(t, tp.B, cfg)
	p := nstest.Open(t, tp.B, func() (*xsk.Program, error) { return xsk.Attach(ifindex, port, port, 1) })
	s := nstest.Open(t, tp.B, func() (*xsk.Socket, error) { return xsk.Open(cfg) })
	if err := p.Register(0, s); err != nil {
		t.Fatal(err)
	}
	tx, rt := openTx(t, tp.A, tp.AddrB, xsk.Config{NoRX: true, Frames: 512, RingSize: 256})
	rd := xsk.NewRxReader(s, 64)
	in := make([]xsk.RxPacket, 16)
	store := make([][]byte, len(in))
	for i := range store {
		store[i] = make([]byte, 9000)
	}
	const total = 4000        // packets, about 8,500 frames; the socket has 1,024
	size := func(i int) int { // mostly the daemon's 4 KiB packets (two frames), some of one and three
		switch i % 10 {
		case 3:
			return 100 + i%500
		case 7:
			return 8000
		}
		return 4172
	}
	fill := func(b []byte, i int) {
		for j := range b {
			b[j] = byte(i*7 + j*13)
		}
	}
	out := make([]xsk.TxPacket, 32)
	pls := make([][]byte, len(out))
	for i := range pls {
		pls[i] = make([]byte, 8000)
	}
	sent, got := 0, 0
	want := make([]byte, 8000)
	for got < total {
		if sent < total && sent-got < 64 { // fewer frames waiting than the fill ring has
			n := min(len(out), total-sent)
			for j := range n {
				pl := pls[j][:size(sent+j)]
				fill(pl, sent+j)
				out[j] = xsk.TxPacket{Payload: pl, SrcPort: uint16(1000 + (sent+j)%1000), DstPort: port}
			}
			if k, err := tx.SendUDP4(&rt.Hop, out[:n]); k != n || err != nil {
				t.Fatalf("SendUDP4: %d, %v", k, err)
			}
			sent += n
		}
		for i := range in {
			in[i].Buf = store[i]
		}
		k, err := rd.ReadUDP4InPlace(in, 1000)
		if err != nil || k == 0 {
			t.Fatalf("ReadUDP4InPlace after %d of %d: %d, %v (stats %+v)", got, total, k, err, rd.Stats())
		}
		for _, q := range in[:k] {
			w := want[:size(got)]
			fill(w, got)
			if q.N != len(w) || !bytes.Equal(q.Buf[:q.N], w) {
				t.Fatalf("datagram %d: %d bytes, not the %d sent (or other bytes)", got, q.N, len(w))
			}
			got++
		}
	}
	st := rd.Stats()
	if st.InPlace < total/2 {
		t.Fatalf("%d of %d datagrams delivered in place, want most", st.InPlace, total)
	}
	if ks, err := s.KernelStats(); err != nil || ks.Rx_dropped+ks.Rx_ring_full+ks.Rx_fill_ring_empty_descs != 0 {
		t.Fatalf("kernel stats %+v, %v: frames leaked or the ring overflowed", ks, err)
	}
	t.Logf("%d datagrams, %d in place", total, st.InPlace)
}
