package client_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport/apitypes"
	"github.com/smartt-transport/smartt/transport/client"
)

// fakeDaemon accepts one messaging session on a Unix socket and hands its connection (past
// the Upgrade) to serve.
func fakeDaemon(t testing.TB, serve func(conn net.Conn, br *bufio.Reader)) *client.Client {
	t.Helper()
	path, ln := unixListener(t)
	go acceptOne(ln, func(conn net.Conn) {
		br := bufio.NewReader(conn)
		if upgrade(conn, br, "") {
			serve(conn, br)
		}
	})
	return client.New(path)
}

// openSession opens a session of c, failing t, with a context that ends in 20 s; both
// are released when t ends.
func openSession(t testing.TB, c *client.Client) (context.Context, *client.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	s, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return ctx, s
}

// unixListener listens on d.sock in a new temporary directory until t ends.
func unixListener(t testing.TB) (string, net.Listener) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "d.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return path, ln
}

// acceptOne runs serve on the first connection ln accepts, then closes it.
func acceptOne(ln net.Listener, serve func(conn net.Conn)) {
	conn, err := ln.Accept()
	if err != nil {
		return
	}
	defer conn.Close()
	serve(conn)
}

// upgrade reads a session request from br and answers it 101 with the extra response
// lines hdr; it reports whether a request was read.
func upgrade(conn net.Conn, br *bufio.Reader, hdr string) bool {
	if _, err := http.ReadRequest(br); err != nil {
		return false
	}
	io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+apitypes.Protocol+"\r\n"+hdr+"\r\n")
	return true
}

// readFrame reads one frame.
func readFrame(br *bufio.Reader) (apitypes.Header, []byte, error) {
	var hb [apitypes.HeaderLen]byte
	if _, err := io.ReadFull(br, hb[:]); err != nil {
		return apitypes.Header{}, nil, err
	}
	h, err := apitypes.ParseHeader(hb[:])
	if err != nil {
		return h, nil, err
	}
	p := make([]byte, h.Len)
	_, err = io.ReadFull(br, p)
	return h, p, err
}

// A session that breaks in the middle of a batch: the messages written before the break
// were handed over (here the fake daemon completes the first), every later one fails at
// once with the error, which SendBatch returns as a *BatchError.
func TestSendBatchBrokenSession(t *testing.T) {
	c := fakeDaemon(t, func(conn net.Conn, br *bufio.Reader) {
		// The first message whole (Send + one Data frame), then a Sent for it, then a
		// few bytes of the second, then the connection ends.
		h, _, err := readFrame(br)
		if err != nil || h.Type != apitypes.FrameSend {
			return
		}
		if _, _, err := readFrame(br); err != nil {
			return
		}
		conn.Write(apitypes.AppendHeader(nil, apitypes.Header{Type: apitypes.FrameSent, Tag: h.Tag, Len: apitypes.SentInfoLen}))
		conn.Write(apitypes.SentInfo{Elapsed: time.Millisecond}.Append(nil))
		io.CopyN(io.Discard, br, 1000)
	})
	ctx, s := openSession(t, c)
	to := netip.MustParseAddrPort("10.0.0.2:23600")
	big := make([]byte, 32<<20) // far more than the socket buffers hold: the write is cut
	msgs := []client.BatchMsg{{To: to, Endpoint: 2, Data: []byte("first")}, {To: to, Endpoint: 2, Data: big},
		{To: to, Endpoint: 2, Data: []byte("third")}, {To: to, Endpoint: 2, Data: big[:100]}}
	pend, err := s.SendBatch(nil, msgs)
	var be *client.BatchError
	if !errors.As(err, &be) || be.Sent != 1 {
		t.Fatalf("SendBatch on a session that broke: %v, want a *BatchError with Sent 1", err)
	}
	if len(pend) != len(msgs) {
		t.Fatalf("%d pendings for %d messages", len(pend), len(msgs))
	}
	if _, err := pend[0].Wait(ctx); err != nil {
		t.Fatalf("the message handed over: %v", err)
	}
	for i, p := range pend[1:] {
		if _, err := p.Wait(ctx); err == nil || !errors.Is(err, be.Err) {
			t.Fatalf("message %d not handed over: Wait %v, want the batch's error", i+1, err)
		}
	}
	// The session is broken: later sends fail.
	if _, err := s.SendAsync(to, 2, []byte("later")); err == nil {
		t.Fatal("SendAsync on a broken session succeeded")
	}
	if _, err := s.SendBatch(nil, msgs[:1]); err == nil {
		t.Fatal("SendBatch on a broken session succeeded")
	}
}

// SendAsync allocates nothing per message but the Pending it returns, SendBatch nothing
// per message (its Pendings are one allocation): the frames go out from the caller's
// slice and the reply channels are recycled. (The session's reader allocates each reply's
// payload: one allocation per message on the receive side, counted here too.)
func TestSendAllocs(t *testing.T) {
	if raceOn {
		t.Skip("the race detector's sync.Pool drops items at random")
	}
	c := fakeDaemon(t, func(conn net.Conn, br *bufio.Reader) { // completes every message
		out := make([]byte, 0, 64<<10)
		var hb [apitypes.HeaderLen]byte
		for { // allocation-free: what is counted is the client's
			if _, err := io.ReadFull(br, hb[:]); err != nil {
				return
			}
			h, err := apitypes.ParseHeader(hb[:])
			if err != nil {
				return
			}
			if _, err := br.Discard(int(h.Len)); err != nil {
				return
			}
			if h.Type == apitypes.FrameSend {
				out = apitypes.AppendHeader(out, apitypes.Header{Type: apitypes.FrameSent, Tag: h.Tag, Len: apitypes.SentInfoLen})
				out = apitypes.SentInfo{Elapsed: time.Millisecond}.Append(out)
			}
			if br.Buffered() == 0 && len(out) > 0 {
				conn.Write(out)
				out = out[:0]
			}
		}
	})
	ctx, s := openSession(t, c)
	to := netip.MustParseAddrPort("10.0.0.2:23600")
	for _, n := range []int{64, 4 << 20} {
		msg := make([]byte, n)
		send := func() {
			p, err := s.SendAsync(to, 2, msg)
			if err == nil {
				_, err = p.Wait(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		send() // the session's scratch
		// The Pending, the reply's payload, and context.AfterFunc's two (a Wait that reads
		// the socket itself watches its context, so that a cancelled wait ends its read).
		if a := testing.AllocsPerRun(50, send); a > 4 {
			t.Errorf("SendAsync of %d bytes and Wait: %.1f allocations, want at most 4 (the Pending, the reply's payload, the context watch)", n, a)
		}
	}
	batch := make([]client.BatchMsg, 64)
	for i := range batch {
		batch[i] = client.BatchMsg{To: to, Endpoint: 2, Data: make([]byte, 64)}
	}
	pend := make([]*client.Pending, 0, len(batch))
	if a := testing.AllocsPerRun(20, func() {
		pend, err := s.SendBatch(pend[:0], batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pend {
			if _, err := p.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}); a > float64(3*len(batch))+2 {
		t.Errorf("SendBatch of %d messages and Wait: %.1f allocations, want at most 2 per batch and per message the reply's payload and the context watch (%d)", len(batch), a, 3*len(batch))
	}
}

// BenchmarkSendPath is the client's send path alone: 16 MiB messages with SendAsync to a
// daemon stand-in that reads and discards every byte (1 MiB reads), through the former
// path (SetCopySends: a chunk per message copied into, frames through the
// write buffer) and today's (writev from the caller's slice), interleaved in rounds
// (sub-benchmarks). Reports the process's CPU seconds per GB (the stand-in's reads
// included) and GB/s.
func BenchmarkSendPath(b *testing.B) {
	for round := range 3 {
		for _, path := range []string{"copy", "direct"} {
			b.Run(fmt.Sprintf("round=%d/path=%s", round, path), func(b *testing.B) {
				c := fakeDaemon(b, func(conn net.Conn, br *bufio.Reader) {
					buf := make([]byte, 1<<20)
					for {
						if _, err := br.Read(buf); err != nil {
							return
						}
					}
				})
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				s, err := c.Open(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				s.SetCopySends(path == "copy")
				msg := make([]byte, 16<<20)
				to := netip.MustParseAddrPort("10.0.0.2:23600")
				b.SetBytes(int64(len(msg)))
				b.ReportAllocs()
				var ru0, ru1 syscall.Rusage
				syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
				start := time.Now()
				b.ResetTimer()
				for range b.N {
					if _, err := s.SendAsync(to, 2, msg); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				el := time.Since(start).Seconds()
				syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
				cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()).Seconds()
				gb := float64(b.N) * float64(len(msg)) / 1e9
				b.ReportMetric(cpu/gb, "cpu_s/GB")
				b.ReportMetric(gb/el, "GB/s")
			})
		}
	}
}
