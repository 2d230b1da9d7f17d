package client

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/transport/apitypes"
)

// fdConn reads a Unix socket with recvmsg, keeping the descriptors passed along.
type fdConn struct {
	c   *net.UnixConn
	mu  sync.Mutex
	fds []int
}

// Read implements io.Reader.
func (f *fdConn) Read(p []byte) (int, error) {
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := f.c.ReadMsgUnix(p, oob)
	if oobn > 0 {
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			fds, _ := unix.ParseUnixRights(&m)
			f.mu.Lock()
			f.fds = append(f.fds, fds...)
			f.mu.Unlock()
		}
	}
	return max(n, 0), err // -1 on a deadline
}

// ringFake is a fake daemon that offers receive rings (RecvRingHeader) and reads the
// client's frames with their descriptors.
type ringFake struct {
	*fakeDaemon
	fc *fdConn
}

// openRingFake opens a session against a fake daemon that offers rings up to max bytes;
// release timers are off (releaseDelay an hour) so that only the flushing rules under test
// return ring space.
func openRingFake(t *testing.T, max int64) (*Session, *ringFake) {
	t.Helper()
	old := releaseDelay
	releaseDelay = time.Hour
	t.Cleanup(func() { releaseDelay = old })
	s, d := openFakeWith(t, apitypes.SendFDHeader+": 1\r\n"+apitypes.RecvRingHeader+": "+strconv.FormatInt(max, 10)+"\r\n")
	if d.br.Buffered() != 0 {
		t.Fatal("client wrote ahead of the 101")
	}
	fc := &fdConn{c: d.conn.(*net.UnixConn)}
	d.br = bufio.NewReaderSize(fc, 1<<20)
	return s, &ringFake{fakeDaemon: d, fc: fc}
}

// frame reads the client's next frame.
func (d *ringFake) frame() (apitypes.Header, []byte) {
	d.t.Helper()
	var hb [apitypes.HeaderLen]byte
	if _, err := io.ReadFull(d.br, hb[:]); err != nil {
		d.t.Fatalf("fake daemon read: %v", err)
	}
	h, err := apitypes.ParseHeader(hb[:])
	if err != nil {
		d.t.Fatal(err)
	}
	p := make([]byte, h.Len)
	if _, err := io.ReadFull(d.br, p); err != nil {
		d.t.Fatalf("fake daemon read: %v", err)
	}
	return h, p
}

// frameWithin is frame with a deadline: ok false when nothing came.
func (d *ringFake) frameWithin(dl time.Duration) (h apitypes.Header, p []byte, ok bool) {
	d.t.Helper()
	d.conn.SetReadDeadline(time.Now().Add(dl))
	defer d.conn.SetReadDeadline(time.Time{})
	if _, err := d.br.Peek(apitypes.HeaderLen); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return h, nil, false
		}
		d.t.Fatalf("fake daemon read: %v", err)
	}
	h, p = d.frame()
	return h, p, true
}

// takeRing reads the client's RecvRing frame and maps the ring it passes.
func (d *ringFake) takeRing(wantSize int64) (tag uint32, mem []byte) {
	d.t.Helper()
	h, p := d.frame()
	size, least, err := apitypes.ParseRecvRing(p)
	if h.Type != apitypes.FrameRecvRing || err != nil || int64(size) != wantSize || least != AutoRingMin {
		d.t.Fatalf("got frame %+v payload %x, want a RecvRing of %d bytes, smallest message %d", h, p, wantSize, AutoRingMin)
	}
	d.fc.mu.Lock()
	fds := d.fc.fds
	d.fc.fds = nil
	d.fc.mu.Unlock()
	if len(fds) != 1 {
		d.t.Fatalf("RecvRing passed %d descriptors", len(fds))
	}
	defer unix.Close(fds[0])
	seals, err := unix.FcntlInt(uintptr(fds[0]), unix.F_GET_SEALS, 0)
	if err != nil || seals&(unix.F_SEAL_SHRINK|unix.F_SEAL_GROW) != unix.F_SEAL_SHRINK|unix.F_SEAL_GROW {
		d.t.Fatalf("ring seals 0x%x: %v", seals, err)
	}
	mem, err = unix.Mmap(fds[0], 0, int(wantSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { unix.Munmap(mem) })
	return h.Tag, mem
}

func ringOKFrame(tag uint32, size int64) []byte {
	return apitypes.AppendSize(apitypes.AppendHeader(nil, apitypes.Header{Type: apitypes.FrameRingOK, Tag: tag, Len: 8}), uint64(size))
}

func errorFrame(tag uint32, code uint16, text string) []byte {
	p := binary.BigEndian.AppendUint16(nil, code)
	p = append(p, text...)
	return append(apitypes.AppendHeader(nil, apitypes.Header{Type: apitypes.FrameError, Tag: tag, Len: uint32(len(p))}), p...)
}

// recvAtFrame announces a message of n bytes at off in the ring.
func recvAtFrame(tag uint32, off, n int) []byte {
	b := apitypes.AppendHeader(nil, apitypes.Header{Type: apitypes.FrameRecvAt, Tag: tag, Len: apitypes.RecvHeaderLen + 8})
	return apitypes.RecvAt{RecvHeader: apitypes.RecvHeader{From: fakePeer, FromEndpoint: 7, Endpoint: 1, Size: uint64(n)}, Offset: uint64(off)}.Append(b)
}

// releasedTags parses a Release frame.
func releasedTags(t *testing.T, h apitypes.Header, p []byte) []uint32 {
	t.Helper()
	n, err := apitypes.ParseRelease(p)
	if h.Type != apitypes.FrameRelease || err != nil {
		t.Fatalf("got frame %+v (%v), want a Release", h, err)
	}
	tags := make([]uint32, n)
	for i := range n {
		tags[i] = apitypes.ReleaseTag(p, i)
	}
	return tags
}

// A receive-only session sets its ring up by itself on the first large message, once:
// the messages that follow while the request is pending still arrive (the reader never
// waits for the reply), messages in the ring are copied out (owned: the ring's space is
// reused under them), and the released space goes back without a write of the client's
// own and with the release timer off: at once for a quarter of the ring, before the
// reader blocks for a sixteenth, and 64 small releases in one frame.
func TestAutoRingFake(t *testing.T) {
	s, d := openRingFake(t, 256<<20)
	const ring = autoRingMsgs * DefaultAutoRecvRing
	got := make(chan *Message, 256)
	go func() {
		for {
			m, err := s.Recv(tctx(t))
			if err != nil {
				close(got)
				return
			}
			got <- m
		}
	}()
	next := func(want []byte) *Message {
		t.Helper()
		m, ok := <-got
		if !ok || !bytes.Equal(m.Data, want) || m.InRing() {
			t.Fatalf("message: ok %v, in ring %v, want %d bytes", ok, ok && m.InRing(), len(want))
		}
		return m
	}
	// Below the threshold: no ring.
	small := msgData(1, DefaultAutoRecvRing-1)
	d.write(recvFrames(1, small, apitypes.MaxPayload))
	next(small)
	if _, _, ok := d.frameWithin(50 * time.Millisecond); ok {
		t.Fatal("a message below the threshold set a ring up")
	}
	// At the threshold: the request, with a ring of four such messages.
	first := msgData(2, DefaultAutoRecvRing)
	d.write(recvFrames(2, first, apitypes.MaxPayload))
	m2 := next(first)
	tag, mem := d.takeRing(ring)
	// Before the reply: more messages over the socket, the reader does not wait for it.
	second := msgData(3, 2*DefaultAutoRecvRing)
	d.write(recvFrames(3, second, apitypes.MaxPayload))
	next(second)
	if size, err := s.AutoRecvRing(); size != 0 || err != nil {
		t.Fatalf("before the reply: AutoRecvRing %d, %v", size, err)
	}
	d.write(ringOKFrame(tag, ring))
	deadline := time.Now().Add(5 * time.Second)
	for size, _ := s.AutoRecvRing(); size != ring; size, _ = s.AutoRecvRing() {
		if time.Now().After(deadline) {
			t.Fatal("the ring was never taken")
		}
		time.Sleep(time.Millisecond)
	}

	// A sixteenth of the ring (and less than a quarter): released before the reader blocks.
	m4data := msgData(4, ring/16)
	copy(mem, m4data)
	d.write(recvAtFrame(4, 0, len(m4data)))
	m4 := next(m4data)
	h, p, ok := d.frameWithin(2 * time.Second)
	if !ok {
		t.Fatal("a sixteenth of the ring released and never given back (reader blocked holding it)")
	}
	if tags := releasedTags(t, h, p); len(tags) != 1 || tags[0] != 4 {
		t.Fatalf("released %v, want [4]", tags)
	}
	// Its space reused at once: the message received before keeps its bytes.
	m5data := msgData(5, ring-ring/8)
	copy(mem, m5data)
	d.write(recvAtFrame(5, 0, len(m5data)))
	next(m5data)
	if h, p := d.frame(); len(releasedTags(t, h, p)) != 1 {
		t.Fatal("want message 5 released alone")
	}
	if !bytes.Equal(m4.Data, m4data) || !bytes.Equal(m2.Data, first) {
		t.Fatal("a received message changed when the ring was reused: Data aliases the ring")
	}
	// Small messages: no write per message; 64 releases share one frame.
	for i := range apitypes.MaxReleaseTags {
		b := msgData(100+i, 1000)
		copy(mem[i*1024:], b)
		d.write(recvAtFrame(uint32(100+i), i*1024, len(b)))
		next(b)
	}
	h, p = d.frame()
	if tags := releasedTags(t, h, p); len(tags) != apitypes.MaxReleaseTags || tags[0] != 100 || tags[63] != 163 {
		t.Fatalf("released %v, want tags 100..163 in one frame", tags)
	}
	// Never asked again, whatever arrives over the socket.
	d.write(recvFrames(200, second, apitypes.MaxPayload))
	next(second)
	if _, err := s.SendAsync(fakePeer, 7, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if h, _ := d.frame(); h.Type != apitypes.FrameSend {
		t.Fatalf("got frame %+v, want the Send (a second RecvRing?)", h)
	}
}

// A refused ring: the session stays on the socket, reports the refusal and never asks
// again; the refused ring is unmapped.
func TestAutoRingRefused(t *testing.T) {
	s, d := openRingFake(t, 256<<20)
	big := msgData(1, 3<<20)
	d.write(recvFrames(1, big, apitypes.MaxPayload))
	if m, err := s.Recv(tctx(t)); err != nil || !bytes.Equal(m.Data, big) {
		t.Fatalf("Recv: %v", err)
	}
	tag, _ := d.takeRing(12 << 20)
	d.write(errorFrame(tag, apitypes.CodeRing, "no rings today"))
	d.write(recvFrames(2, big, apitypes.MaxPayload))
	if m, err := s.Recv(tctx(t)); err != nil || !bytes.Equal(m.Data, big) {
		t.Fatalf("Recv after the refusal: %v", err)
	}
	var e *Error
	if size, err := s.AutoRecvRing(); size != 0 || !errors.As(err, &e) || e.Code != apitypes.CodeRing {
		t.Fatalf("AutoRecvRing: %d, %v; want the refusal", size, err)
	}
	s.mu.Lock()
	r := s.ring
	s.mu.Unlock()
	if r != nil {
		t.Fatal("the refused ring is still the session's")
	}
	if _, err := s.SendAsync(fakePeer, 7, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if h, _ := d.frame(); h.Type != apitypes.FrameSend {
		t.Fatalf("got frame %+v, want the Send (asked again?)", h)
	}
}

// Without the daemon's offer (an older daemon, rings off), or with SetAutoRecvRing(0),
// the session never asks.
func TestAutoRingNotOffered(t *testing.T) {
	for _, c := range []struct {
		name   string
		offer  bool
		thresh int64
	}{{"no offer", false, DefaultAutoRecvRing}, {"opted out", true, 0}} {
		t.Run(c.name, func(t *testing.T) {
			var s *Session
			var d *fakeDaemon
			if c.offer {
				var rf *ringFake
				s, rf = openRingFake(t, 256<<20)
				d = rf.fakeDaemon
			} else {
				s, d = openFakeWith(t, apitypes.SendFDHeader+": 1\r\n")
			}
			s.SetAutoRecvRing(c.thresh)
			big := msgData(1, 2<<20)
			d.write(recvFrames(1, big, apitypes.MaxPayload))
			if m, err := s.Recv(tctx(t)); err != nil || !bytes.Equal(m.Data, big) {
				t.Fatalf("Recv: %v", err)
			}
			if _, err := s.SendAsync(fakePeer, 7, []byte("x")); err != nil {
				t.Fatal(err)
			}
			if h := d.readFrame(); h.Type != apitypes.FrameSend {
				t.Fatalf("got frame %+v, want the Send", h)
			}
			if size, err := s.AutoRecvRing(); size != 0 || err != nil {
				t.Fatalf("AutoRecvRing: %d, %v", size, err)
			}
		})
	}
}

// The automatic ring's size: four messages, in pages, at most MaxAutoRecvRing and the
// daemon's bound, and none for a message larger than half of that.
func TestAutoRingSize(t *testing.T) {
	page := uint64(os.Getpagesize())
	for _, c := range []struct {
		n         uint64
		daemonMax int64
		want      int64
	}{
		{1, 256 << 20, int64(page)},
		{1 << 20, 256 << 20, 4 << 20},
		{1<<20 + 1, 256 << 20, 4<<20 + int64(page)},
		{16 << 20, 256 << 20, 64 << 20},
		{20 << 20, 256 << 20, 64 << 20},                  // capped at MaxAutoRecvRing
		{MaxAutoRecvRing / 2, 256 << 20, 64 << 20},       // at the cap's half
		{MaxAutoRecvRing/2 + 1, 256 << 20, 0},            // beyond: no ring
		{2 << 20, 4 << 20, 4 << 20},                      // capped at the daemon's bound, at its half
		{2<<20 + 1, 4 << 20, 0},                          // beyond it
		{1 << 20, 4<<20 + int64(page) - 1, 4 << 20},      // the daemon's bound rounded down to pages
		{1 << 30, 1 << 30, 0},                            // a huge message
		{1, int64(page) - 1, 0},                          // a bound below a page
		{page / 2, int64(page), int64(page)},             // the smallest ring
		{page/2 + 1, int64(page), 0},                     // beyond it
		{uint64(1) << 32, int64(MaxAutoRecvRing), 0},     // the largest message the client takes
		{MaxAutoRecvRing / 8, MaxAutoRecvRing, 32 << 20}, // exactly four
	} {
		if got := autoRingSize(c.n, c.daemonMax); got != c.want {
			t.Errorf("autoRingSize(%d, %d) = %d, want %d", c.n, c.daemonMax, got, c.want)
		}
	}
}
