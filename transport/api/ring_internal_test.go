//go:build linux

package api

import (
	"bufio"
	"io"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// The ring allocator: messages are contiguous, aligned, in order; space comes back only
// from the front; a release must name an announced, unreleased message.
func TestRecvRingAllocator(t *testing.T) {
	r := newRecvRing(make([]byte, 4096))
	must := func(tag uint32, n int64, want int64) {
		t.Helper()
		off, ok := r.alloc(tag, n)
		if !ok || off != want {
			t.Fatalf("alloc %d bytes (tag %d): offset %d ok %v, want %d", n, tag, off, ok, want)
		}
		r.announce(tag)
	}
	must(1, 1000, 0)
	must(2, 1000, 1024) // aligned to 64
	must(3, 1000, 2048)
	if _, ok := r.alloc(4, 1100); ok { // 3072+1100 > 4096, and the start is taken
		t.Fatal("allocated past the end")
	}
	if _, err := r.release(2); err != nil { // out of order: nothing reclaimed yet
		t.Fatal(err)
	}
	if _, ok := r.alloc(4, 1100); ok {
		t.Fatal("reclaimed out of order")
	}
	if _, err := r.release(2); err != errReleaseTwice {
		t.Fatalf("double release: %v", err)
	}
	if freed, err := r.release(1); err != nil || !freed {
		t.Fatalf("release 1: %v %v", freed, err)
	}
	must(4, 1100, 0) // wrapped: the tail [3072, 4096) is skipped
	if _, err := r.release(9); err != errReleaseUnknown {
		t.Fatalf("unknown tag: %v", err)
	}
	if _, err := r.release(1); err != errReleaseUnknown { // reclaimed
		t.Fatalf("reclaimed tag: %v", err)
	}
	off, ok := r.alloc(5, 64)
	if !ok || off != 1152 {
		t.Fatalf("alloc 5: %d %v", off, ok)
	}
	if _, err := r.release(5); err != errReleaseEarly {
		t.Fatalf("release before announce: %v", err)
	}
	if _, ok := r.alloc(6, 4097); ok {
		t.Fatal("allocated more than the ring")
	}
	for _, tag := range []uint32{3, 4} {
		if _, err := r.release(tag); err != nil {
			t.Fatal(err)
		}
	}
	r.announce(5)
	if _, err := r.release(5); err != nil || r.count != 0 || r.used() != 0 {
		t.Fatalf("release 5: %v, %d slots, %d used", err, r.count, r.used())
	}
	// Tags across the u32 wrap, and a table that grows.
	r = newRecvRing(make([]byte, 1<<16))
	for i := range uint32(200) {
		if _, ok := r.alloc(0xffffff00+i, 1); !ok {
			t.Fatalf("alloc %d", i)
		}
		r.announce(0xffffff00 + i)
	}
	for i := range uint32(200) {
		if _, err := r.release(0xffffff00 + (199 - i)); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
	if r.count != 0 {
		t.Fatalf("%d slots left", r.count)
	}
}

// ringTestSession is a session on a real Unix socket (so small messages take the direct
// path) whose peer end is drained; ring (bytes, 0: none) is an anonymous shared mapping.
func ringTestSession(t *testing.T, ring int) *session {
	t.Helper()
	s := limitServer(t, DefaultConfig())
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A send buffer that holds every test message even if the drain lags (a full socket
	// hands the rest to the writer, which copies it: an allocation the test would count).
	if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 64<<20); err != nil {
		unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 64<<20)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "sock")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := conn(fds[0]), conn(fds[1])
	go io.Copy(io.Discard, b)
	x := newSession(s, 1, a, bufio.NewReader(a))
	s.sess[1] = x
	if _, err := s.bind(x, 0); err != nil {
		t.Fatal(err)
	}
	if ring > 0 {
		mem, err := unix.Mmap(-1, 0, ring, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANON)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Munmap(mem) })
		x.ring = newRecvRing(mem)
	}
	return x
}

// No allocation per received message on the daemon's side, on the socket path and the
// ring's: a small message written directly, and a large one (chunked) through the
// writer's steps (take it off the queue; copy it into the ring and write its RecvAt
// frame, or write its Data frames with writev; done).
func TestRecvRingZeroAllocs(t *testing.T) {
	small := msgBody{pieces: [][]byte{make([]byte, 12+64)}, skip: 12, n: 64}
	chunks := make([][]byte, 8)
	for i := range chunks {
		chunks[i] = make([]byte, 16<<10)
	}
	large := msgBody{pieces: chunks, skip: 12, n: 8<<14 - 12}
	for _, tc := range []struct {
		name string
		ring int
		body msgBody
	}{{"socket, direct", 0, small}, {"socket, writer", 0, large}, {"ring, direct", 1 << 20, small}, {"ring, writer", 1 << 20, large}} {
		x := ringTestSession(t, tc.ring)
		bw := bufio.NewWriterSize(io.Discard, 64<<10)
		hdr := make([]byte, 0, HeaderLen)
		x.scratch = make([]byte, 0, 128)
		step := func() {
			if got := x.enqueueRecv(limitFrom, tc.body); got != recvQueued {
				t.Fatalf("%s: outcome %d", tc.name, got)
			}
			x.mu.Lock()
			if len(x.queue) > 0 { // the writer's part
				f := x.nextLocked()
				if f.typ == FrameRecvAt {
					if err := x.toRingLocked(&f, bw.Flush); err != nil {
						t.Fatal(err)
					}
				}
				x.mu.Unlock()
				if err := x.writeFrame(bw, hdr, f); err != nil {
					t.Fatal(err)
				}
				x.mu.Lock()
				x.doneLocked(f)
			}
			if x.ring != nil {
				if _, err := x.ring.release(x.recvSeq); err != nil {
					t.Fatal(err)
				}
			}
			x.mu.Unlock()
		}
		step() // first use sizes the scratch buffers
		if a := testing.AllocsPerRun(1000, step); a != 0 {
			t.Errorf("%s: %.2f allocations per message, want 0", tc.name, a)
		}
		if tc.ring > 0 && x.srv.ringMsgs.Load() != 1002 {
			t.Errorf("%s: %d ring messages, want 1002 (AllocsPerRun runs it once more)", tc.name, x.srv.ringMsgs.Load())
		}
	}
}
