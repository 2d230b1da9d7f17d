//go:build linux

package api_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

var addrD = netip.MustParseAddrPort("10.0.0.4:23600")

// sendAll sends message i of sizes[i] bytes (ringMsg) to endpoint ep at to, four
// outstanding.
func sendAll(t *testing.T, s *client.Session, to netip.AddrPort, ep uint32, sizes []int) {
	t.Helper()
	sendWindow(t, s, to, ep, sizes, 4)
}

// sendWindow is sendAll with window messages outstanding.
func sendWindow(t *testing.T, s *client.Session, to netip.AddrPort, ep uint32, sizes []int, window int) {
	t.Helper()
	var pend []*client.Pending
	for i, n := range sizes {
		p, err := s.SendAsync(to, ep, ringMsg(i, n))
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, p)
		if len(pend) == window {
			if _, err := pend[0].Wait(ctx(t)); err != nil {
				t.Fatal(err)
			}
			pend = pend[1:]
		}
	}
	for _, p := range pend {
		if _, err := p.Wait(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
}

// recvAll receives len(sizes) messages on r and checks each is message i, whole, in order
// and in a buffer of its own; every keep-th it keeps unreleased, and returns them.
func recvAll(t *testing.T, r *client.Session, sizes []int, keep int) (<-chan error, *[]*client.Message) {
	kept := new([]*client.Message)
	done := make(chan error, 1)
	go func() {
		for i, n := range sizes {
			m, err := r.Recv(ctx(t))
			if err != nil {
				done <- err
				return
			}
			if m.InRing() || int(m.Size) != n || !bytes.Equal(m.Data, ringMsg(i, n)) {
				t.Errorf("message %d (%d bytes): got %d bytes (index %d), in ring %v", i, n, m.Size, binary.BigEndian.Uint32(m.Data), m.InRing())
			}
			if keep > 0 && i%keep == 0 {
				*kept = append(*kept, m)
			} else {
				m.Release()
			}
		}
		done <- nil
	}()
	return done, kept
}

// A receive-only client (it never writes after its Bind) sets its ring up on the first
// large message, once, and receives messages totalling a dozen times the ring, all whole,
// in order and its own (kept ones unchanged after the ring was reused many times), with
// no stall: a client that held ring space for api.write_timeout (here 1 s) would be
// disconnected. Sizes up to half the ring after smaller ones make the daemon wait for
// room.
func TestAutoRecvRingReceiveOnly(t *testing.T) {
	_, b, s, r := boundPair(t, func(c *smarttd.Config) { c.API.WriteTimeout = 1e9 })
	const ring = 4 * client.DefaultAutoRecvRing
	sizes := []int{client.DefaultAutoRecvRing}
	// ring+1 comes over the socket (ring_fallback) and must not set up a second ring.
	pattern := []int{ring / 2, 300 << 10, 1 << 20, 64 << 10, 1500 << 10, 100, ring/2 - 1, 17, 700 << 10, ring + 1}
	total := 0
	for i := 0; total < 12*ring; i++ {
		n := pattern[i%len(pattern)]
		sizes = append(sizes, n)
		total += n
	}
	done, kept := recvAll(t, r, sizes, 7)
	sendAll(t, s, addrB, 2, sizes)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, m := range *kept {
		i := int(binary.BigEndian.Uint32(m.Data))
		if !bytes.Equal(m.Data, ringMsg(i, sizes[i])) {
			t.Fatalf("kept message %d changed: its Data aliases the ring", i)
		}
		m.Release()
	}
	if size, err := r.AutoRecvRing(); size != ring || err != nil {
		t.Fatalf("AutoRecvRing: %d, %v; want %d", size, err, ring)
	}
	st := b.API.Stats()
	if st.RingSessions != 1 || st.RingRefused != 0 || st.RingMsgs < uint64(len(sizes))/2 || st.RingFallback == 0 || st.ClientsStalled != 0 {
		t.Fatalf("ring sessions %d, refused %d (a second request), ring messages %d of %d, over the socket for size %d, stalled %d",
			st.RingSessions, st.RingRefused, st.RingMsgs, len(sizes), st.RingFallback, st.ClientsStalled)
	}
	t.Logf("%d messages, %d MiB: %d through the ring, %d too large for it", len(sizes), total>>20, st.RingMsgs, st.RingFallback)
	if ss := sessionsOf(t, b); len(ss) != 1 || ss[0].RecvRing != ring {
		t.Fatalf("sessions %+v, want one with a %d-byte ring", ss, ring)
	}
}

// The automatic ring's limits: no ring below the threshold, one at it; none when the
// session opted out; the daemon's api.max_recv_ring bounds it (a message beyond half of it
// sets none up, one at half does); with rings off on the daemon the session never asks
// and receives everything over the socket. An explicit ring is refused once the session
// has its own.
func TestAutoRecvRingLimits(t *testing.T) {
	mn := daemon.NewMemNet()
	dir := shortDir(t)
	a := startDaemon(t, mn, addrA, dir, nil)
	b := startDaemon(t, mn, addrB, dir, nil)
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	quiet := func(r *client.Session, d *smarttd.Daemon, sessions int64) {
		t.Helper()
		time.Sleep(50 * time.Millisecond) // a ring set up would be taken by now
		if size, err := r.AutoRecvRing(); size != 0 || err != nil {
			t.Fatalf("AutoRecvRing: %d, %v; want none", size, err)
		}
		if st := d.API.Stats(); st.RingSessions != sessions || st.RingRefused != 0 {
			t.Fatalf("ring sessions %d (want %d), refused %d", st.RingSessions, sessions, st.RingRefused)
		}
	}
	ringOf := func(r *client.Session, want int64) {
		t.Helper()
		waitFor(t, func() bool { size, _ := r.AutoRecvRing(); return size != 0 })
		if size, err := r.AutoRecvRing(); size != want || err != nil {
			t.Fatalf("AutoRecvRing: %d, %v; want %d", size, err, want)
		}
	}
	exchange := func(r *client.Session, to netip.AddrPort, ep uint32, sizes []int) {
		t.Helper()
		done, _ := recvAll(t, r, sizes, 0)
		sendAll(t, s, to, ep, sizes)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}

	r := openBound(t, client.New(b.Config.API.Socket), 2)
	exchange(r, addrB, 2, []int{client.DefaultAutoRecvRing - 1, client.DefaultAutoRecvRing - 1, 1000})
	quiet(r, b, 0)
	exchange(r, addrB, 2, []int{client.DefaultAutoRecvRing, 100})
	ringOf(r, 4*client.DefaultAutoRecvRing)
	exchange(r, addrB, 2, []int{3 << 20, 100, 2 << 20}) // through the ring, owned
	if err := r.EnableRecvRing(ctx(t), 1<<20); err == nil || !strings.Contains(err.Error(), "already has a receive ring") {
		t.Fatalf("explicit ring after the automatic one: %v", err)
	}

	off := openBound(t, client.New(b.Config.API.Socket), 3)
	off.SetAutoRecvRing(0)
	exchange(off, addrB, 3, []int{2 << 20, 2 << 20})
	quiet(off, b, 1)

	// The daemon's bound: 4 MiB takes messages up to 2 MiB.
	c := startDaemon(t, mn, addrC, dir, func(c *smarttd.Config) { c.API.MaxRecvRing = 4 << 20 })
	rc := openBound(t, client.New(c.Config.API.Socket), 4)
	exchange(rc, addrC, 4, []int{2<<20 + 1})
	quiet(rc, c, 0)
	exchange(rc, addrC, 4, []int{2 << 20, 1 << 20, 2 << 20})
	ringOf(rc, 4<<20)

	// Rings off: never asked, everything over the socket.
	d := startDaemon(t, mn, addrD, dir, func(c *smarttd.Config) { c.API.MaxRecvRing = 0 })
	rd := openBound(t, client.New(d.Config.API.Socket), 5)
	sizes := []int{}
	for range 8 {
		sizes = append(sizes, 2<<20)
	}
	exchange(rd, addrD, 5, sizes)
	quiet(rd, d, 0)
	if st := d.API.Stats(); st.RingMsgs != 0 {
		t.Fatalf("ring messages %d on a daemon without rings", st.RingMsgs)
	}
}

// Once a session has set its automatic ring up, its small messages still come over the
// socket (the RecvRing request's smallest message, client.AutoRingMin): only messages of
// at least that size go through the ring; all arrive whole and in order.
func TestAutoRecvRingSmallOverSocket(t *testing.T) {
	_, b, s, r := boundPair(t, nil)
	sizes := []int{client.DefaultAutoRecvRing} // sets the ring up (it comes over the socket)
	done, _ := recvAll(t, r, sizes, 0)
	sendAll(t, s, addrB, 2, sizes)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for { // the daemon's RingOK reaches the client when it next reads
		if size, _ := r.AutoRecvRing(); size > 0 || time.Now().After(deadline) {
			break
		}
		sendAll(t, s, addrB, 2, []int{1})
		if m, err := r.Recv(ctx(t)); err != nil {
			t.Fatal(err)
		} else {
			m.Release()
		}
	}
	if size, err := r.AutoRecvRing(); size == 0 {
		t.Fatalf("no automatic ring: %v", err)
	}
	before := b.API.Stats().RingMsgs
	sizes = []int{client.AutoRingMin - 1, 100, client.AutoRingMin, 1, client.AutoRingMin + 1, 17}
	done, _ = recvAll(t, r, sizes, 0)
	sendAll(t, s, addrB, 2, sizes)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := b.API.Stats().RingMsgs - before; got != 2 {
		t.Fatalf("%d messages went through the ring, want 2 (those of at least %d bytes)", got, client.AutoRingMin)
	}
}
