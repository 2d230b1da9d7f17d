package main

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// smartt send -timeout: a message smarttd has started sending is reported handed over
// with its outcome pending (pendingError: exit status 3, not the failure's 1); one that
// had not started (waiting for room at a local receiver that does not read) is cancelled
// and reported as such (a failure).
func TestSendTimeoutPendingOrCancelled(t *testing.T) {
	dir := t.TempDir()
	ds, err := smarttd.LocalPair(dir, smarttd.Options{}, func(c *smarttd.Config) {
		c.LogLevel = "error"
		c.API.MaxRecvQueue, c.API.SocketBuffer = 1000, 4096
	})
	if err != nil {
		t.Fatal(err)
	}
	defer smarttd.StopAll(ds[:], 2*time.Second)
	a := ds[0]
	file := filepath.Join(dir, "msg")
	os.WriteFile(file, make([]byte, 2<<20), 0o644)
	// A bound UDP socket that never reads: no ICMP comes back (which would fail the
	// message at once), so the message is in flight until the engine gives up.
	silent, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	_, err = execute("send", file, "-socket", a.Config.API.Socket, "-to", silent.LocalAddr().String(), "-timeout", "500ms", "-progress", "off")
	if !errors.As(err, new(pendingError)) || !strings.Contains(err.Error(), "handed to smarttd, outcome pending") {
		t.Fatalf("send to a silent peer: %v, want outcome pending", err)
	}
	// A local receiver that does not read, its queue full with one message being written.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Through the daemon, whose queue for the receiver is what is full here (a direct
	// pair would put the message in the receiving client's own queue).
	c := client.New(a.Config.API.Socket)
	c.SetDirect(false)
	r, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.SetRecvWriter(func(*client.Message) io.Writer { return blockWriter{ctx} })
	if _, err := r.Bind(ctx, 9); err != nil {
		t.Fatal(err)
	}
	s, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Bind(ctx, 0)
	if _, err := s.Send(ctx, a.Config.Listen, 9, make([]byte, 2<<20)); err != nil {
		t.Fatal(err)
	}
	_, err = execute("send", file, "-socket", a.Config.API.Socket, "-to", a.Config.Listen.String(), "-endpoint", "9",
		"-timeout", "500ms", "-progress", "off")
	if err == nil || errors.As(err, new(pendingError)) || !strings.Contains(err.Error(), "cancelled before any byte") {
		t.Fatalf("send to a full local receiver: %v, want cancelled", err)
	}
	cancel() // free the receiver's reader before its Close
}

// blockWriter holds the receiving client's reader until ctx ends.
type blockWriter struct{ ctx context.Context }

// Write implements io.Writer.
func (b blockWriter) Write(p []byte) (int, error) {
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

// smartt recv --timeout: without --count the timeout is the planned end (no error); with
// --count it fails saying how many of the messages came, not "context deadline exceeded".
func TestRecvTimeoutSaysHowFar(t *testing.T) {
	dir := t.TempDir()
	ds := quietPair(t, dir)
	sock := ds[0].Config.API.Socket
	if _, err := execute("recv", "-socket", sock, "-out", filepath.Join(dir, "a"), "-timeout", "200ms"); err != nil {
		t.Fatalf("recv --timeout without --count: %v, want the planned end", err)
	}
	_, err := execute("recv", "-socket", sock, "-out", filepath.Join(dir, "b"), "-count", "2", "-timeout", "200ms")
	if err == nil || !strings.Contains(err.Error(), "timed out (--timeout 200ms) after 0 of the 2 messages") || strings.Contains(err.Error(), "context deadline") {
		t.Fatalf("recv --count 2 --timeout 200ms: %v", err)
	}
}

// A timeout with a message begun but not returned is a failure even without --count: the
// message's file (or stdout) may hold part of it.
func TestRecvEndCutMessage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	o := &recvOpts{}
	o.cf.timeout = time.Second
	if err := recvEnd(ctx, ctx.Err(), o, 3, true); err == nil || !strings.Contains(err.Error(), "after 3 messages, with the next one begun") {
		t.Fatalf("cut message: %v", err)
	}
	if err := recvEnd(ctx, ctx.Err(), o, 3, false); err != nil {
		t.Fatalf("planned end: %v", err)
	}
	if err := recvEnd(context.Background(), errors.New("broken"), o, 3, false); err == nil || err.Error() != "broken" {
		t.Fatalf("other error: %v", err)
	}
}
