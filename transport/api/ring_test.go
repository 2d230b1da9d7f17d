//go:build linux

package api_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/apitypes"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

var addrC = netip.MustParseAddrPort("10.0.0.3:23600")

func indexOf(ms []*client.Message, m *client.Message) int {
	for i, x := range ms {
		if x == m {
			return i
		}
	}
	return -1
}

// ringMsg is message i of n bytes: its index, then bytes derived from it.
func ringMsg(i, n int) []byte {
	b := make([]byte, n)
	for k := range b {
		b[k] = byte(k*7 + i*131 + k>>8)
	}
	if n >= 4 {
		binary.BigEndian.PutUint32(b, uint32(i))
	}
	return b
}

// Through a receive ring every message arrives exactly once and byte-exact, small ones
// (written directly) and chunked large ones (written by the session's writer), with the
// ring wrapping many times; a message larger than the ring comes over the socket.
func TestRecvRingDeliversEveryMessageOnce(t *testing.T) {
	_, b, s, r := boundPair(t, nil)
	const ring = 1 << 20
	if err := r.EnableRecvRing(ctx(t), ring); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{1, 3, 64, 4096, 16<<10 + 1, 100 << 10, 300 << 10, ring, ring + 1, 3 << 20}
	for range 120 {
		sizes = append(sizes, 1+rng.IntN(200<<10))
	}
	inRing, fallback := 0, 0
	done := make(chan error, 1)
	seen := make([]int, len(sizes))
	go func() {
		for range sizes {
			m, err := r.Recv(ctx(t))
			if err != nil {
				done <- err
				return
			}
			i := len(sizes)
			if m.Size >= 4 {
				i = int(binary.BigEndian.Uint32(m.Data))
			} else {
				for k, n := range sizes {
					if n == int(m.Size) {
						i = k
					}
				}
			}
			if i >= len(sizes) || !bytes.Equal(m.Data, ringMsg(i, sizes[i])) {
				t.Errorf("message of %d bytes (index %d) differs", m.Size, i)
			} else {
				seen[i]++
			}
			if m.InRing() != (sizes[i] <= ring) {
				t.Errorf("message %d of %d bytes: in ring %v", i, sizes[i], m.InRing())
			}
			if m.InRing() {
				inRing++
			} else {
				fallback++
			}
			m.Release()
		}
		done <- nil
	}()
	sendWindow(t, s, addrB, 2, sizes, 8)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, c := range seen {
		if c != 1 {
			t.Errorf("message %d (%d bytes) received %d times", i, sizes[i], c)
		}
	}
	st := b.API.Stats()
	if int(st.RingMsgs) != inRing || int(st.RingFallback) != fallback || fallback != 2 || st.RingSessions != 1 {
		t.Fatalf("ring messages %d (received %d), fallback %d (received %d, want 2), ring sessions %d",
			st.RingMsgs, inRing, st.RingFallback, fallback, st.RingSessions)
	}
	// Messages of 64 KiB and more came straight into the ring (transport.Placer) once
	// the connection was proven, intact like the others.
	if placed := b.Node.Stats().MsgsPlaced; st.RingPlaced == 0 || placed != st.RingPlaced {
		t.Fatalf("%d messages placed by the API, %d by the engine; want some, the same", st.RingPlaced, placed)
	}
	t.Logf("%d of %d ring messages received straight into the ring", st.RingPlaced, st.RingMsgs)
	r.Close()
	waitFor(t, func() bool { return b.API.Stats().RingSessions == 0 })
}

// ringMemfd makes a memfd of size bytes with the given seals, for raw sessions.
// sparse, among ringMemfd's seals, leaves the memfd's pages unallocated.
const sparse = 1 << 30

func ringMemfd(t *testing.T, size int64, seals int) int {
	t.Helper()
	fd, err := unix.MemfdCreate("test-ring", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	if seals&sparse == 0 && size > 0 {
		if err := unix.Fallocate(fd, 0, 0, size); err != nil { // the client allocates its ring
			t.Fatal(err)
		}
	}
	if seals &^= sparse; seals != 0 {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
			t.Fatal(err)
		}
	}
	return fd
}

// sendRecvRing sends a RecvRing frame for a ring of size bytes with fd (-1: none).
func sendRecvRing(t *testing.T, conn net.Conn, tag uint32, size uint64, fd int) {
	t.Helper()
	p := apitypes.AppendSize(nil, size)
	frame := append(api.AppendHeader(nil, api.Header{Type: api.FrameRecvRing, Tag: tag, Len: uint32(len(p))}), p...)
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	if _, _, err := conn.(*net.UnixConn).WriteMsgUnix(frame, oob, nil); err != nil {
		t.Fatal(err)
	}
}

// readFrame reads one frame.
func readFrame(t *testing.T, conn net.Conn) (api.Header, []byte) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hb [api.HeaderLen]byte
	if _, err := io.ReadFull(conn, hb[:]); err != nil {
		t.Fatal(err)
	}
	return frameBody(t, conn, hb[:])
}

func release(conn net.Conn, tags ...uint32) {
	p := apitypes.AppendRelease(nil, tags...)
	conn.Write(append(api.AppendHeader(nil, api.Header{Type: api.FrameRelease, Len: uint32(len(p))}), p...))
}

// wantProtocolClose reads to the end of the session and checks its last frame is a
// protocol error whose text contains want.
func wantProtocolClose(t *testing.T, conn net.Conn, want string) {
	t.Helper()
	frames, payloads := readFrames(t, conn)
	if len(frames) == 0 || frames[len(frames)-1].Type != api.FrameError {
		t.Fatalf("session ended with frames %+v, want a protocol error", frames)
	}
	code, text, _ := api.ParseError(payloads[len(payloads)-1])
	if code != api.CodeProtocol || !strings.Contains(text, want) {
		t.Fatalf("error %d %q, want code 1 with %q", code, text, want)
	}
}

// RecvRing requests the daemon refuses (Error 12, the session goes on), and releases it
// refuses: forged, out of range, early, repeated, malformed or without a ring each end
// the session as a protocol error and are counted.
func TestRecvRingValidation(t *testing.T) {
	mn := daemon.NewMemNet()
	dir := shortDir(t)
	a := startDaemon(t, mn, addrA, dir, nil)
	b := startDaemon(t, mn, addrB, dir, func(c *smarttd.Config) { c.API.MaxRecvRing = 1 << 20 })
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	const sealed = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW
	refusals := []struct {
		name  string
		size  uint64
		fd    int
		want  string
		after func(conn net.Conn)
	}{
		{"beyond max_recv_ring", 2 << 20, ringMemfd(t, 2<<20, sealed), "api.max_recv_ring", nil},
		{"not a page multiple", 5000, ringMemfd(t, 5000, sealed), "api.max_recv_ring", nil},
		{"not sealed", 64 << 10, ringMemfd(t, 64<<10, 0), "not sealed", nil},
		{"sealed against writes", 64 << 10, ringMemfd(t, 64<<10, sealed|unix.F_SEAL_WRITE), "against writes", nil},
		{"size differs", 128 << 10, ringMemfd(t, 64<<10, sealed), "holds 65536 bytes", nil},
		{"pages not allocated", 64 << 10, ringMemfd(t, 64<<10, sealed|sparse), "65536 bytes are not allocated", nil},
	}
	for i, tc := range refusals {
		conn := rawSession(t, b.Config.API.Socket, uint32(10+i))
		sendRecvRing(t, conn, 2, tc.size, tc.fd)
		h, p := readFrame(t, conn)
		code, text, _ := api.ParseError(p)
		if h.Type != api.FrameError || h.Tag != 2 || code != api.CodeRing || !strings.Contains(text, tc.want) {
			t.Fatalf("%s: frame 0x%02x tag %d, error %d %q; want Error 12 with %q", tc.name, h.Type, h.Tag, code, text, tc.want)
		}
		// The session goes on: a second (good) request works.
		sendRecvRing(t, conn, 3, 64<<10, ringMemfd(t, 64<<10, sealed))
		if h, _ := readFrame(t, conn); h.Type != api.FrameRingOK || h.Tag != 3 {
			t.Fatalf("%s: then a good ring: frame 0x%02x tag %d", tc.name, h.Type, h.Tag)
		}
		sendRecvRing(t, conn, 4, 64<<10, ringMemfd(t, 64<<10, sealed))
		if h, p := readFrame(t, conn); h.Type != api.FrameError || !strings.Contains(string(p), "already has a receive ring") {
			t.Fatalf("%s: a second ring: frame 0x%02x %q", tc.name, h.Type, p)
		}
		conn.Close()
	}
	if got := b.API.Stats().RingRefused; got != uint64(2*len(refusals)) {
		t.Fatalf("ring_refused %d, want %d", got, 2*len(refusals))
	}

	// A ring session that received one message (tag = its RecvAt frame's tag).
	ringSession := func(ep uint32) (net.Conn, uint32) {
		conn := rawSession(t, b.Config.API.Socket, ep)
		fd := ringMemfd(t, 64<<10, sealed)
		sendRecvRing(t, conn, 2, 64<<10, fd)
		if h, _ := readFrame(t, conn); h.Type != api.FrameRingOK {
			t.Fatalf("frame 0x%02x", h.Type)
		}
		if _, err := s.Send(ctx(t), addrB, ep, []byte("in the ring")); err != nil {
			t.Fatal(err)
		}
		h, p := readFrame(t, conn)
		at, err := apitypes.ParseRecvAt(p)
		if h.Type != api.FrameRecvAt || err != nil || at.Size != 11 || at.Offset+at.Size > 64<<10 {
			t.Fatalf("frame 0x%02x %+v %v", h.Type, at, err)
		}
		mem, err := unix.Mmap(fd, 0, 64<<10, unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(mem)
		if got := string(mem[at.Offset : at.Offset+at.Size]); got != "in the ring" {
			t.Fatalf("ring holds %q", got)
		}
		return conn, h.Tag
	}
	bad := []struct {
		name string
		do   func(conn net.Conn, tag uint32)
		want string
	}{
		{"forged tag", func(conn net.Conn, tag uint32) { release(conn, tag+1000) }, "names no message"},
		{"tag 0", func(conn net.Conn, tag uint32) { release(conn, 0) }, "names no message"},
		{"double release", func(conn net.Conn, tag uint32) { release(conn, tag); release(conn, tag) }, "names no message"},
		{"double in one frame", func(conn net.Conn, tag uint32) { release(conn, tag, tag) }, "names no message"},
		{"malformed", func(conn net.Conn, tag uint32) {
			conn.Write(append(api.AppendHeader(nil, api.Header{Type: api.FrameRelease, Len: 3}), 1, 2, 3))
		}, "release of 3 bytes"},
	}
	for i, tc := range bad {
		before := b.API.Stats().RingBadReleases
		conn, tag := ringSession(uint32(30 + i))
		tc.do(conn, tag)
		wantProtocolClose(t, conn, tc.want)
		want := before + 1
		if tc.name == "malformed" {
			want = before // a framing error, not a release of a wrong tag
		}
		if got := b.API.Stats().RingBadReleases; got != want {
			t.Fatalf("%s: ring_bad_releases %d, want %d", tc.name, got, want)
		}
	}
	// A release on a session without a ring.
	conn := rawSession(t, b.Config.API.Socket, 50)
	release(conn, 1)
	wantProtocolClose(t, conn, "without a receive ring")
	// A RecvRing frame without a descriptor.
	conn = rawSession(t, b.Config.API.Socket, 51)
	sendRecvRing(t, conn, 2, 64<<10, -1)
	wantProtocolClose(t, conn, "without a descriptor")
	// A good release keeps the session.
	conn, tag := ringSession(52)
	release(conn, tag)
	if _, err := s.Send(ctx(t), addrB, 52, []byte("again")); err != nil {
		t.Fatal(err)
	}
	if h, _ := readFrame(t, conn); h.Type != api.FrameRecvAt || h.Tag != tag+1 {
		t.Fatalf("after a good release: frame 0x%02x tag %d", h.Type, h.Tag)
	}
}

// A client that does not release fills its ring; later messages wait in its receive queue
// (bounded by api.max_recv_queue: beyond it they are dropped with the drop notice) and
// arrive once it releases. A client that releases nothing for api.write_timeout while a
// message waits for room is disconnected (clients_stalled); other sessions go on.
func TestRecvRingFull(t *testing.T) {
	// What a queued 16 KiB message is charged: a 16 KiB receive chunk and a 64-byte one
	// (the envelope spills into it), their table (2..8 slots of 24 bytes) and the fixed
	// overhead: 4 fit in max_recv_queue behind the oldest, 5 do not.
	const heldMin, msgHeld = 16384 + 64 + 24 + 256, 16384 + 64 + 8*24 + 256
	mn := daemon.NewMemNet()
	dir := shortDir(t)
	a := startDaemon(t, mn, addrA, dir, nil)
	b := startDaemon(t, mn, addrB, dir, func(c *smarttd.Config) {
		c.API.MaxRecvQueue, c.API.RecvBackpressure = 4*msgHeld, false // drops are the rule without back-pressure
	})
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	r := openBound(t, client.New(b.Config.API.Socket), 2)
	if err := r.EnableRecvRing(ctx(t), 64<<10); err != nil {
		t.Fatal(err)
	}
	const n = 16 << 10
	for i := range 12 { // 4 fill the ring, 1 waits for room, 4 queue behind it, 3 dropped
		if _, err := s.Send(ctx(t), addrB, 2, ringMsg(i, n)); err != nil {
			t.Fatal(err)
		}
	}
	var held []*client.Message
	for range 4 {
		m, err := r.Recv(ctx(t))
		if err != nil || !m.InRing() {
			t.Fatalf("%v, in ring %v", err, m != nil && m.InRing())
		}
		held = append(held, m)
	}
	if st := b.API.Stats(); st.RecvOverflow != 3 || st.RecvQueued < 5*heldMin || st.RecvQueued > 5*msgHeld {
		t.Fatalf("recv_overflow %d, queued %d; want 3, %d..%d", st.RecvOverflow, st.RecvQueued, 5*heldMin, 5*msgHeld)
	}
	if ss := sessionsOf(t, b); len(ss) != 1 || ss[0].RecvRing != 64<<10 || ss[0].RecvRingUse != 64<<10 {
		t.Fatalf("sessions %+v, want a full 64 KiB ring", ss)
	}
	for _, m := range held {
		if !bytes.Equal(m.Data, ringMsg(indexOf(held, m), n)) {
			t.Fatal("held message changed")
		}
	}
	for _, m := range held {
		m.Release()
	}
	for i := 4; i < 9; i++ {
		m, err := r.Recv(ctx(t))
		if err != nil || !bytes.Equal(m.Data, ringMsg(i, n)) {
			t.Fatalf("message %d: %v", i, err)
		}
		m.Release()
	}
	_, err := r.Recv(ctx(t)) // the drop notice, queued behind the messages that waited
	wantCode(t, err, api.CodeRecvOverflow, "dropped 3 messages")
	waitFor(t, func() bool { return b.API.Stats().RecvQueued == 0 })

	// Never releasing, with a short write_timeout and without back-pressure: disconnected,
	// counted; others unharmed.
	c := startDaemon(t, mn, addrC, dir, func(c *smarttd.Config) { c.API.WriteTimeout, c.API.RecvBackpressure = 200e6, false })
	q := openBound(t, client.New(c.Config.API.Socket), 3)
	if err := q.EnableRecvRing(ctx(t), 64<<10); err != nil {
		t.Fatal(err)
	}
	other := openBound(t, client.New(c.Config.API.Socket), 4)
	for i := range 6 {
		if _, err := s.Send(ctx(t), addrC, 3, ringMsg(i, n)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return c.API.Stats().ClientsStalled == 1 })
	for i := 0; ; i++ {
		m, err := q.Recv(ctx(t))
		if err != nil {
			if i != 4 {
				t.Fatalf("session ended after %d messages (%v), want 4", i, err)
			}
			break
		}
		_ = m // held: never released
	}
	if _, err := s.Send(ctx(t), addrC, 4, []byte("still served")); err != nil {
		t.Fatal(err)
	}
	if m, err := other.Recv(ctx(t)); err != nil || string(m.Data) != "still served" {
		t.Fatalf("other session: %v", err)
	}
}

// A session that busy-polls in Recv receives every message, from the socket and from its
// ring, and still returns when its context ends.
func TestBusyPollRecv(t *testing.T) {
	_, _, s, r := boundPair(t, nil)
	r.SetBusyPoll(200 * time.Microsecond)
	for _, ring := range []bool{false, true} {
		if ring {
			if err := r.EnableRecvRing(ctx(t), 1<<20); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 20 {
			if _, err := s.SendAsync(addrB, 2, ringMsg(i, 100)); err != nil {
				t.Fatal(err)
			}
			m, err := r.Recv(ctx(t))
			if err != nil || !bytes.Equal(m.Data, ringMsg(i, 100)) || m.InRing() != ring {
				t.Fatalf("message %d (ring %v): %v", i, ring, err)
			}
			m.Release()
		}
	}
	c, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := r.Recv(c); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Recv with nothing to receive: %v", err)
	}
}

// The client library's side: EnableRecvRing's own checks, the daemon's refusal as an
// *Error with code 12 (the session goes on over the socket), a second ring refused, and
// SetRecvWriter streaming ring messages out (their space released at once).
func TestRecvRingClientAPI(t *testing.T) {
	mn := daemon.NewMemNet()
	dir := shortDir(t)
	a := startDaemon(t, mn, addrA, dir, nil)
	b := startDaemon(t, mn, addrB, dir, func(c *smarttd.Config) { c.API.MaxRecvRing = 0 })
	c := startDaemon(t, mn, addrC, dir, nil)
	s := openBound(t, client.New(a.Config.API.Socket), 1)

	off := openBound(t, client.New(b.Config.API.Socket), 2)
	if err := off.EnableRecvRing(ctx(t), 5000); err == nil || !strings.Contains(err.Error(), "multiple of the page size") {
		t.Fatalf("ring of 5000 bytes: %v", err)
	}
	wantCode(t, off.EnableRecvRing(ctx(t), 64<<10), api.CodeRing, "api.max_recv_ring = 0")
	if _, err := s.Send(ctx(t), addrB, 2, []byte("over the socket")); err != nil {
		t.Fatal(err)
	}
	if m, err := off.Recv(ctx(t)); err != nil || m.InRing() || string(m.Data) != "over the socket" {
		t.Fatalf("after a refused ring: %v", err)
	}

	r := openBound(t, client.New(c.Config.API.Socket), 3)
	if err := r.EnableRecvRing(ctx(t), 64<<10); err != nil {
		t.Fatal(err)
	}
	if err := r.EnableRecvRing(ctx(t), 64<<10); err == nil || !strings.Contains(err.Error(), "already has a receive ring") {
		t.Fatalf("second ring: %v", err)
	}
	var got bytes.Buffer
	r.SetRecvWriter(func(m *client.Message) io.Writer { return &got })
	for i := range 10 { // 160 KiB through a 64 KiB ring: only if each is released once written
		if _, err := s.Send(ctx(t), addrC, 3, ringMsg(i, 16<<10)); err != nil {
			t.Fatal(err)
		}
		m, err := r.Recv(ctx(t))
		if err != nil || m.Data != nil || m.InRing() {
			t.Fatalf("message %d: %v (data %d bytes, in ring %v)", i, err, len(m.Data), m.InRing())
		}
	}
	var want []byte
	for i := range 10 {
		want = append(want, ringMsg(i, 16<<10)...)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("streamed %d bytes, want %d", got.Len(), len(want))
	}
	if st := c.API.Stats(); st.RingMsgs != 10 {
		t.Fatalf("ring messages %d, want 10", st.RingMsgs)
	}
}
