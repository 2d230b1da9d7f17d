package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport/apitypes"
)

// fakeDaemon is the daemon's end of one session, written and read frame by frame by a
// test.
type fakeDaemon struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
	wmu  sync.Mutex
}

// openFake opens a session of a Client against a fake daemon and returns both ends.
func openFake(t *testing.T) (*Session, *fakeDaemon) {
	t.Helper()
	return openFakeWith(t, "")
}

// openFakeWith is openFake with extra lines for the daemon's 101 response.
func openFakeWith(t *testing.T, respHeaders string) (*Session, *fakeDaemon) {
	t.Helper()
	dir, err := os.MkdirTemp("", "scli")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan *fakeDaemon, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			got <- nil
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+apitypes.Protocol+"\r\n"+respHeaders+"\r\n")
		got <- &fakeDaemon{t: t, conn: c, br: br}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := New(sock).Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := <-got
	if d == nil {
		t.Fatal("fake daemon: no session")
	}
	t.Cleanup(func() { s.Close(); d.conn.Close() })
	return s, d
}

func (d *fakeDaemon) write(b []byte) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if _, err := d.conn.Write(b); err != nil {
		d.t.Errorf("fake daemon write: %v", err)
	}
}

var fakePeer = netip.MustParseAddrPort("10.9.9.9:23600")

// recvFrames is a received message as the daemon writes it: a Recv frame and Data frames
// of at most chunk bytes.
func recvFrames(tag uint32, data []byte, chunk int) []byte {
	b := apitypes.AppendHeader(nil, apitypes.Header{Type: apitypes.FrameRecv, Tag: tag, Len: apitypes.RecvHeaderLen})
	b = apitypes.RecvHeader{From: fakePeer, FromEndpoint: 7, Endpoint: 1, Size: uint64(len(data))}.Append(b)
	for off := 0; off < len(data); off += chunk {
		p := data[off:min(off+chunk, len(data))]
		b = apitypes.AppendHeader(b, apitypes.Header{Type: apitypes.FrameData, Tag: tag, Len: uint32(len(p))})
		b = append(b, p...)
	}
	return b
}

func sentFrame(tag uint32) []byte {
	b := apitypes.AppendHeader(nil, apitypes.Header{Type: apitypes.FrameSent, Tag: tag, Len: apitypes.SentInfoLen})
	return apitypes.SentInfo{Elapsed: time.Duration(tag)}.Append(b)
}

// readSend reads one Send frame and its Data frames from the client and returns its tag.
func (d *fakeDaemon) readSend() uint32 {
	var hb [apitypes.HeaderLen]byte
	for {
		if _, err := io.ReadFull(d.br, hb[:]); err != nil {
			d.t.Errorf("fake daemon read: %v", err)
			return 0
		}
		h, _ := apitypes.ParseHeader(hb[:])
		p := make([]byte, h.Len)
		if _, err := io.ReadFull(d.br, p); err != nil {
			d.t.Errorf("fake daemon read: %v", err)
			return 0
		}
		if h.Type != apitypes.FrameSend {
			continue // a Release
		}
		sh, _ := apitypes.ParseSendHeader(p)
		for off := uint64(0); off < sh.Size; {
			io.ReadFull(d.br, hb[:])
			dh, _ := apitypes.ParseHeader(hb[:])
			io.CopyN(io.Discard, d.br, int64(dh.Len))
			off += uint64(dh.Len)
		}
		return h.Tag
	}
}

func msgData(i, n int) []byte {
	b := bytes.Repeat([]byte{byte(i), byte(i >> 8)}, n/2+1)[:n]
	return b
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Two goroutines calling Recv at once (taking turns reading the socket) get every message
// exactly once, in order per goroutine, while a third waits for its messages' replies.
func TestConcurrentRecvGetsEachMessageOnce(t *testing.T) {
	s, d := openFake(t)
	const n = 3000
	var wg sync.WaitGroup
	got := make([][]int, 2)
	for g := range 2 {
		wg.Add(1) // not wg.Go: the client module builds with Go 1.24
		go func() {
			defer wg.Done()
			for {
				m, err := s.Recv(tctx(t))
				if err != nil {
					t.Errorf("Recv: %v", err)
					return
				}
				i := int(m.Data[0]) | int(m.Data[1])<<8
				if !bytes.Equal(m.Data, msgData(i, len(m.Data))) {
					t.Errorf("message %d corrupted", i)
				}
				m.Release()
				if i == n { // the end marker: one per goroutine
					return
				}
				got[g] = append(got[g], i)
			}
		}()
	}
	// The replies' waiter.
	wg.Add(1) // not wg.Go: the client module builds with Go 1.24
	go func() {
		defer wg.Done()
		for range 50 {
			p, err := s.SendAsync(fakePeer, 7, []byte("x"))
			if err != nil {
				t.Errorf("SendAsync: %v", err)
				return
			}
			if _, err := p.Wait(tctx(t)); err != nil {
				t.Errorf("Wait: %v", err)
				return
			}
		}
	}()
	go func() {
		for range 50 {
			d.write(sentFrame(d.readSend()))
		}
	}()
	for i := range n {
		// Sizes from a few bytes to several Data frames, written in pieces of varied
		// size so frames straddle the client's reads.
		size := 2 + (i*7919)%5000
		b := recvFrames(uint32(i+1), msgData(i, size), 1500)
		d.wmu.Lock() // the replies' frames go between messages
		for len(b) > 0 {
			k := min(len(b), 1+(i*31)%700)
			if _, err := d.conn.Write(b[:k]); err != nil {
				t.Fatal(err)
			}
			b = b[k:]
		}
		d.wmu.Unlock()
	}
	d.write(recvFrames(n+1, msgData(n, 8), 8))
	d.write(recvFrames(n+2, msgData(n, 8), 8))
	wg.Wait()
	seen := make(map[int]int)
	for g := range got {
		for k, i := range got[g] {
			seen[i]++
			if k > 0 && got[g][k-1] >= i {
				t.Fatalf("goroutine %d got message %d after %d", g, i, got[g][k-1])
			}
		}
	}
	for i := range n {
		if seen[i] != 1 {
			t.Fatalf("message %d received %d times", i, seen[i])
		}
	}
	t.Logf("goroutines got %d and %d messages", len(got[0]), len(got[1]))
}

// A Recv whose context ends while it reads the socket (half a frame is in) returns the
// context's error; the next Recv gets the message whole, and the one after it.
func TestRecvCancelledWhileReadingKeepsTheFrame(t *testing.T) {
	old := idleReadDelay
	idleReadDelay = time.Hour // no idle reader: the Recv is the reader
	defer func() { idleReadDelay = old }()
	s, d := openFake(t)
	go func() {
		time.Sleep(20 * time.Millisecond) // the Recv waits first: the idle reader steps down
		d.write(recvFrames(1, []byte("first"), 100))
	}()
	if m, err := s.Recv(tctx(t)); err != nil || string(m.Data) != "first" {
		t.Fatalf("first message: %v", err)
	}
	free := func() {
		t.Helper()
		if len(s.rx.tok) != 1 {
			t.Fatal("the read token is taken: the next waiter would not be the reader")
		}
	}
	for _, cut := range []int{5, apitypes.HeaderLen + 10, apitypes.HeaderLen + apitypes.RecvHeaderLen + 3, apitypes.HeaderLen + apitypes.RecvHeaderLen + apitypes.HeaderLen + 100} {
		want := msgData(cut, 3000)
		b := recvFrames(uint32(cut), want, 1000)
		free()
		d.write(b[:cut])
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		_, err := s.Recv(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("cut at %d: Recv returned %v, want the context's error", cut, err)
		}
		d.write(b[cut:])
		d.write(recvFrames(uint32(cut+1), []byte("next"), 100))
		m, err := s.Recv(tctx(t))
		if err != nil || !bytes.Equal(m.Data, want) || m.From != fakePeer || m.FromEndpoint != 7 {
			t.Fatalf("cut at %d: the message after the cancelled Recv: %v", cut, err)
		}
		if m, err := s.Recv(tctx(t)); err != nil || string(m.Data) != "next" {
			t.Fatalf("cut at %d: the message after that: %v", cut, err)
		}
	}
	// A Wait cancelled while it reads leaves the frame for the next reader too.
	p, err := s.SendAsync(fakePeer, 7, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	tag := d.readSend()
	b := append(sentFrame(tag), recvFrames(99, []byte("after"), 100)...)
	free()
	d.write(b[:4])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	_, err = p.Wait(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait: %v", err)
	}
	d.write(b[4:])
	if m, err := s.Recv(tctx(t)); err != nil || string(m.Data) != "after" {
		t.Fatalf("the message after a cancelled Wait: %v", err)
	}
}

// With no goroutine in Recv, replies still reach the goroutines waiting for them (the
// waiter reads), and messages are read off the socket (the idle reader) for a later Recv:
// more than the socket buffers hold.
func TestRepliesAndMessagesWhileNobodyReceives(t *testing.T) {
	s, d := openFake(t)
	for range 20 {
		p, err := s.SendAsync(fakePeer, 7, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		tag := d.readSend()
		go d.write(sentFrame(tag))
		if info, err := p.Wait(tctx(t)); err != nil || info.Elapsed != time.Duration(tag) {
			t.Fatalf("Wait: %v %v", info, err)
		}
	}
	// Replies nobody waits for, and 8 MiB of messages nobody receives yet: the daemon's
	// writes finish only if the client reads them.
	var tags []uint32
	for range 20 {
		if _, err := s.SendAsync(fakePeer, 7, []byte("x")); err != nil {
			t.Fatal(err)
		}
		tags = append(tags, d.readSend())
	}
	const n = 8
	wrote := make(chan struct{})
	go func() {
		for _, tag := range tags {
			d.write(sentFrame(tag))
		}
		for i := range n {
			d.write(recvFrames(uint32(i+1), msgData(i, 1<<20), 256<<10))
		}
		close(wrote)
	}()
	select {
	case <-wrote:
	case <-time.After(10 * time.Second):
		t.Fatal("the daemon's writes did not finish: nobody read the session")
	}
	for i := range n {
		m, err := s.Recv(tctx(t))
		if err != nil || !bytes.Equal(m.Data, msgData(i, 1<<20)) {
			t.Fatalf("message %d: %v", i, err)
		}
		m.Release()
	}
	s.mu.Lock()
	left := len(s.waiters)
	s.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d replies not delivered", left)
	}
}

// Close wakes every goroutine waiting on the session: Recvs (the reader and the one
// waiting for its turn) and a Wait; later calls fail at once.
func TestCloseWakesEveryWaiter(t *testing.T) {
	s, d := openFake(t)
	p, err := s.SendAsync(fakePeer, 7, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	d.readSend()
	errs := make(chan error, 3)
	for range 2 {
		go func() { _, err := s.Recv(context.Background()); errs <- err }()
	}
	go func() { _, err := p.Wait(context.Background()); errs <- err }()
	time.Sleep(20 * time.Millisecond)
	d.write(recvFrames(1, msgData(1, 100), 10)[:50]) // a reader is mid-frame
	time.Sleep(20 * time.Millisecond)
	s.Close()
	for range 3 {
		select {
		case err := <-errs:
			if err == nil {
				t.Fatal("a waiter returned no error after Close")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close left a waiter blocked")
		}
	}
	if _, err := s.Recv(context.Background()); err == nil {
		t.Fatal("Recv after Close: no error")
	}
	if _, err := s.SendAsync(fakePeer, 7, []byte("x")); err == nil {
		t.Fatal("SendAsync after Close: no error")
	}
}

// The daemon's goodbye (an Error frame, then the end of the connection) reaches a Recv
// after the messages before it, and a session nobody waits on notices it (SendAsync
// fails).
func TestDaemonClosesTheSession(t *testing.T) {
	s, d := openFake(t)
	d.write(recvFrames(1, []byte("last"), 100))
	d.write(apitypes.AppendHeader(nil, apitypes.Header{Type: apitypes.FrameError, Len: uint32(len(apitypes.AppendError(nil, apitypes.CodeClosed, "bye")))}))
	d.write(apitypes.AppendError(nil, apitypes.CodeClosed, "bye"))
	d.conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		broken := s.err != nil
		s.mu.Unlock()
		if broken {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the session did not notice the daemon's goodbye with nobody waiting")
		}
		time.Sleep(time.Millisecond)
	}
	if m, err := s.Recv(tctx(t)); err != nil || string(m.Data) != "last" {
		t.Fatalf("the message before the goodbye: %v", err)
	}
	var e *Error
	if _, err := s.Recv(tctx(t)); !errors.As(err, &e) || e.Code != apitypes.CodeClosed {
		t.Fatalf("Recv after the goodbye: %v", err)
	}
	if _, err := s.SendAsync(fakePeer, 7, []byte("x")); err == nil {
		t.Fatal("SendAsync on a closed session: no error")
	}
}

// SetRecvWriter streams messages through whichever goroutine reads, and a busy-polling
// Recv receives like a blocking one.
func TestRecvWriterAndBusyPoll(t *testing.T) {
	s, d := openFake(t)
	var mu sync.Mutex
	var sunk bytes.Buffer
	s.SetRecvWriter(func(m *Message) io.Writer {
		return writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return sunk.Write(p) })
	})
	want := msgData(3, 700<<10)
	d.write(recvFrames(1, want, 100<<10))
	m, err := s.Recv(tctx(t))
	if err != nil || m.Data != nil || m.Size != uint64(len(want)) {
		t.Fatalf("streamed message: %v %v", m, err)
	}
	mu.Lock()
	ok := bytes.Equal(sunk.Bytes(), want)
	mu.Unlock()
	if !ok {
		t.Fatal("streamed bytes differ")
	}
	s.SetRecvWriter(nil)
	s.SetBusyPoll(200 * time.Microsecond)
	for i := range 50 {
		go d.write(recvFrames(uint32(i+2), msgData(i, 64), 64))
		m, err := s.Recv(tctx(t))
		if err != nil || !bytes.Equal(m.Data, msgData(i, 64)) {
			t.Fatalf("busy-polled message %d: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Recv(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("busy-polled Recv with nothing to receive: %v", err)
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// readFrame reads one frame from the client and returns its header.
func (d *fakeDaemon) readFrame() apitypes.Header {
	var hb [apitypes.HeaderLen]byte
	if _, err := io.ReadFull(d.br, hb[:]); err != nil {
		d.t.Fatalf("fake daemon read: %v", err)
	}
	h, _ := apitypes.ParseHeader(hb[:])
	io.CopyN(io.Discard, d.br, int64(h.Len))
	return h
}

// With lazy Sent frames (the daemon confirmed the header), Wait asks for its Sent frame
// (WantSent with its tag) once the session has received a message, and not before.
func TestWaitAsksForHeldSent(t *testing.T) {
	s, d := openFakeWith(t, apitypes.LazySentHeader+": 1\r\n")
	if !s.lazySent {
		t.Fatal("the daemon's confirmation was not taken")
	}
	wait := func() (uint32, chan error) {
		p, err := s.SendAsync(fakePeer, 7, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := p.Wait(tctx(t)); done <- err }()
		return d.readSend(), done
	}
	tag, done := wait()
	d.write(sentFrame(tag))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Nothing received yet: the Wait asked for nothing (the next frame is the next Send).
	if _, err := s.SendAsync(fakePeer, 7, []byte("y")); err != nil {
		t.Fatal(err)
	}
	if h := d.readFrame(); h.Type != apitypes.FrameSend {
		t.Fatalf("before the session received: %+v, want the next Send", h)
	}
	d.readFrame() // its Data
	d.write(recvFrames(1, []byte("hello"), 100))
	if m, err := s.Recv(tctx(t)); err != nil || string(m.Data) != "hello" {
		t.Fatalf("Recv: %v", err)
	}
	tag, done = wait()
	if h := d.readFrame(); h.Type != apitypes.FrameWantSent || h.Tag != tag {
		t.Fatalf("after the Send of a session that received: %+v, want WantSent %d", h, tag)
	}
	d.write(sentFrame(tag))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
