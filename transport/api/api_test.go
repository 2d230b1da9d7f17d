package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

var (
	addrA = netip.MustParseAddrPort("10.0.0.1:23600")
	addrB = netip.MustParseAddrPort("10.0.0.2:23600")
)

func shortDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "sapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// startDaemon starts a daemon on mn at addr with its API socket in dir.
func startDaemon(t testing.TB, mn *daemon.MemNet, addr netip.AddrPort, dir string, mod func(*smarttd.Config)) *smarttd.Daemon {
	t.Helper()
	cfg := smarttd.DefaultConfig()
	cfg.Listen = addr
	cfg.API.Socket = filepath.Join(dir, addr.Addr().String()+".sock")
	cfg.LogLevel = "warn"
	if mod != nil {
		mod(&cfg)
	}
	d, err := smarttd.Start(cfg, smarttd.Options{OpenSocket: smarttd.MemSockets(mn), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		d.Shutdown(ctx)
	})
	return d
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func openBound(t testing.TB, c *client.Client, ep uint32) *client.Session {
	t.Helper()
	s, err := c.Open(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Bind(ctx(t), ep); err != nil {
		t.Fatal(err)
	}
	return s
}

// daemonPair starts daemons at addrA and addrB, their configs adjusted by modA and modB,
// on one in-memory network, their sockets in one short directory.
func daemonPair(t testing.TB, modA, modB func(*smarttd.Config)) (a, b *smarttd.Daemon) {
	t.Helper()
	mn := daemon.NewMemNet()
	dir := shortDir(t)
	return startDaemon(t, mn, addrA, dir, modA), startDaemon(t, mn, addrB, dir, modB)
}

// boundPair starts daemons at addrA and addrB (modB adjusts b's config) on one in-memory
// network and binds endpoint 1 on a (s) and endpoint 2 on b (r).
func boundPair(t *testing.T, modB func(*smarttd.Config)) (a, b *smarttd.Daemon, s, r *client.Session) {
	t.Helper()
	a, b = daemonPair(t, nil, modB)
	return a, b, openBound(t, client.New(a.Config.API.Socket), 1), openBound(t, client.New(b.Config.API.Socket), 2)
}

func TestControlOverUnixSocketHTTP(t *testing.T) {
	mn := daemon.NewMemNet()
	dir := shortDir(t)
	a := startDaemon(t, mn, addrA, dir, nil)
	startDaemon(t, mn, addrB, dir, nil)
	fi, err := os.Stat(a.Config.API.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o660 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket mode %v, want socket 0660", fi.Mode())
	}
	c := client.New(a.Config.API.Socket)
	s := openBound(t, c, 7)
	if _, err := s.Send(ctx(t), addrB, 9, []byte("make a connection")); err != nil {
		t.Fatal(err)
	}
	// Plain HTTP over the socket, as curl --unix-socket does.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", a.Config.API.Socket)
	}}}
	for path, want := range map[string]string{
		"/v1/status":       `"listen": "10.0.0.1:23600"`,
		"/v1/version":      `"protocol": "smartt-msg/2"`,
		"/v1/capabilities": `"cc": [`,
		"/v1/conns":        `"peer": "10.0.0.2:23600"`,
		"/v1/config":       `"socket": "` + a.Config.API.Socket,
		"/v1/counters":     `"msgs_sent": 1`,
		"/v1/sessions":     `"endpoint": 7`,
	} {
		resp, err := hc.Get("http://x" + path)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(b.String(), want) {
			t.Errorf("%s: %d %s\nwant it to contain %s", path, resp.StatusCode, b.String(), want)
		}
	}
	// Errors are JSON everywhere, 404 and 405 included, and say what to do.
	for _, tc := range []struct {
		method, path string
		code         int
		want         string
	}{
		{"GET", "/v1/nosuch", 404, "/v1/status"},
		{"GET", "/", 404, "docs/api.md"},
		{"POST", "/v1/status", 405, "use GET"},
		{"DELETE", "/v1/session", 405, "use POST"},
	} {
		req, _ := http.NewRequest(tc.method, "http://x"+tc.path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error string }
		derr := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || derr != nil || !strings.Contains(body.Error, tc.want) ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s %s: %d %q (%v, %s), want %d and an error containing %q", tc.method, tc.path, resp.StatusCode,
				body.Error, derr, resp.Header.Get("Content-Type"), tc.code, tc.want)
		}
	}
	// Units are ASCII: durations read "10s", "200us", never "µs".
	resp, err := hc.Get("http://x/v1/config")
	if err != nil {
		t.Fatal(err)
	}
	var cb bytes.Buffer
	cb.ReadFrom(resp.Body)
	resp.Body.Close()
	if strings.Contains(cb.String(), "µ") || !strings.Contains(cb.String(), `"base_rtt": "`) {
		t.Errorf("/v1/config is not ASCII or lacks base_rtt:\n%s", cb.String())
	}
	conns, err := c.Conns(ctx(t))
	if err != nil || len(conns) != 1 || conns[0].CC != "smartt" || conns[0].Window <= 0 || conns[0].SRTT <= 0 {
		t.Fatalf("conns %+v %v", conns, err)
	}
	// The sender's network progress: the message (and its 12-byte envelope) acknowledged.
	if got := conns[0].BytesAcked; got != uint64(len("make a connection"))+12 {
		t.Errorf("conn bytes_acked = %d, want %d", got, len("make a connection")+12)
	}
	var sess []api.SessionInfo
	if err := c.Get(ctx(t), "/v1/sessions", &sess); err != nil || len(sess) != 1 || sess[0].Cred == nil ||
		sess[0].Cred.PID != int32(os.Getpid()) || sess[0].Cred.UID != uint32(os.Getuid()) {
		t.Fatalf("sessions %+v %v: want our own peer credentials", sess, err)
	}
}

func TestSocketPathSetup(t *testing.T) {
	dir := shortDir(t)
	cfg := api.DefaultConfig()
	cfg.Socket = filepath.Join(dir, "sub", "dir", "d.sock")
	ln, err := api.Listen(cfg)
	if err != nil {
		t.Fatal(err) // directory created
	}
	if _, err := api.Listen(cfg); err == nil || !strings.Contains(err.Error(), "another daemon") {
		t.Fatalf("second listener on a live socket: %v", err)
	}
	// A stale socket (its daemon died without unlinking) is replaced.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	ln2, err := api.Listen(cfg)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	ln2.Close()
	// A regular file is never deleted.
	cfg.Socket = filepath.Join(dir, "file")
	os.WriteFile(cfg.Socket, []byte("keep"), 0o600)
	if _, err := api.Listen(cfg); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("regular file at the socket path: %v", err)
	}
	if b, _ := os.ReadFile(cfg.Socket); string(b) != "keep" {
		t.Fatal("regular file lost")
	}
	// A configured group owns the socket.
	g, err := user.LookupGroupId(strconv.Itoa(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Socket = filepath.Join(dir, "grp.sock")
	cfg.Group = g.Name
	ln3, err := api.Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(cfg.Socket)
	if err != nil || fi.Sys().(*syscall.Stat_t).Gid != uint32(os.Getgid()) || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket %v: %v", fi.Mode(), err)
	}
	ln3.Close()
	cfg.Socket = filepath.Join(dir, "g.sock")
	cfg.Group = "no-such-group-smartt"
	if _, err := api.Listen(cfg); err == nil || !strings.Contains(err.Error(), "api.group") {
		t.Fatalf("unknown group: %v", err)
	}
}

func TestMessagingAndIsolation(t *testing.T) {
	a, b := daemonPair(t, nil, nil)
	ca, cb := client.New(a.Config.API.Socket), client.New(b.Config.API.Socket)
	sender := openBound(t, ca, 1)
	r1 := openBound(t, cb, 10)
	r2 := openBound(t, cb, 20)
	// The same endpoint cannot be bound twice.
	s3, err := cb.Open(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	var ae *client.Error
	if _, err := s3.Bind(ctx(t), 10); !errors.As(err, &ae) || ae.Code != api.CodeBound {
		t.Fatalf("second bind of endpoint 10: %v", err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 300_000) // 4.8 MB: several Data frames
	for i, m := range []struct {
		ep   uint32
		data []byte
	}{{10, []byte("to ten")}, {20, []byte("to twenty")}, {10, big}} {
		info, err := sender.Send(ctx(t), addrB, m.ep, m.data)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if info.Elapsed <= 0 || info.SRTT <= 0 || info.Window <= 0 {
			t.Fatalf("sent info %+v", info)
		}
	}
	check := func(s *client.Session, ep uint32, want ...[]byte) {
		for _, w := range want {
			m, err := s.Recv(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			if m.Endpoint != ep || m.FromEndpoint != 1 || m.From.Addr() != addrA.Addr() || !bytes.Equal(m.Data, w) {
				t.Fatalf("endpoint %d got %d bytes from %v/%d to %d", ep, len(m.Data), m.From, m.FromEndpoint, m.Endpoint)
			}
		}
		c, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if m, err := s.Recv(c); err == nil {
			t.Fatalf("endpoint %d got another client's message of %d bytes", ep, len(m.Data))
		}
	}
	check(r1, 10, []byte("to ten"), big)
	check(r2, 20, []byte("to twenty"))
	// To an endpoint nobody bound: delivered to the daemon, counted, dropped.
	if _, err := sender.Send(ctx(t), addrB, 30, []byte("nobody")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return b.API.Stats().Undeliverable == 1 })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not reached in 5 s")
}

func wantCode(t *testing.T, err error, code uint16, text string) {
	t.Helper()
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Code != code || !strings.Contains(ae.Text, text) {
		t.Fatalf("error %v, want code %d mentioning %q", err, code, text)
	}
}

func TestLimitMaxMessage(t *testing.T) {
	mn := daemon.NewMemNet()
	dir := shortDir(t)
	a := startDaemon(t, mn, addrA, dir, func(c *smarttd.Config) { c.API.MaxMessage = 1000 })
	startDaemon(t, mn, addrB, dir, nil)
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	_, err := s.Send(ctx(t), addrB, 1, make([]byte, 1001))
	wantCode(t, err, api.CodeTooLarge, "api.max_message allows 1..1000")
	// The session survives and the next message goes.
	if _, err := s.Send(ctx(t), addrB, 1, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
}

func TestLimitSendBeforeBind(t *testing.T) {
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), nil)
	s, err := client.New(a.Config.API.Socket).Open(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Send(ctx(t), addrB, 1, []byte("x"))
	wantCode(t, err, api.CodeNotBound, "bind")
}

func TestLimitMaxOutstanding(t *testing.T) {
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), func(c *smarttd.Config) {
		c.API.MaxMessage, c.API.MaxOutstanding = 1000, 1500
	})
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	// Nobody at 10.0.0.9: the first message stays outstanding.
	p, err := s.SendAsync(netip.MustParseAddrPort("10.0.0.9:23600"), 1, make([]byte, 1000))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Send(ctx(t), addrB, 1, make([]byte, 600))
	wantCode(t, err, api.CodeOutstanding, "api.max_outstanding = 1500")
	if _, err := s.SendAsync(addrB, 1, make([]byte, 500)); err != nil {
		t.Fatal(err)
	}
	_ = p
}

func TestLimitMaxClients(t *testing.T) {
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), func(c *smarttd.Config) { c.API.MaxClients = 1 })
	c := client.New(a.Config.API.Socket)
	s := openBound(t, c, 1)
	_, err := c.Open(ctx(t))
	var ae *client.Error
	if !errors.As(err, &ae) || ae.HTTP != 503 || !strings.Contains(ae.Text, "api.max_clients (1)") {
		t.Fatalf("second client: %v", err)
	}
	if a.API.Stats().ClientsRefused != 1 {
		t.Fatal("refusal not counted")
	}
	s.Close()
	waitFor(t, func() bool { return a.API.Stats().Sessions == 0 })
	s2, err := c.Open(ctx(t))
	if err != nil {
		t.Fatalf("slot not freed after the first client left: %v", err)
	}
	s2.Close()
}

// gate is a SetRecvWriter sink that holds the client's reader until it is opened, so
// that the daemon's frames wait in its queue.
type gate struct {
	open chan struct{}
	buf  *bytes.Buffer
}

// Write implements io.Writer.
func (g gate) Write(p []byte) (int, error) {
	<-g.open
	return g.buf.Write(p)
}

func TestLimitMaxRecvQueue(t *testing.T) {
	mn := daemon.NewMemNet()
	dir := shortDir(t)
	a := startDaemon(t, mn, addrA, dir, nil)
	// The kernel's default socket buffer (api.socket_buffer: 0): the big message must not
	// fit into the socket, so that it stays queued while the client holds its reader.
	// Drops are the daemon's rule without back-pressure (api.recv_backpressure: false).
	// A 1,000-byte message is charged the 1 KiB receive buffer it holds (with its
	// envelope), its 24-byte table and a fixed 256 bytes (1,304); a 1-byte one 344: the
	// first fits in max_recv_queue, a second does not.
	const limit = 1400
	b := startDaemon(t, mn, addrB, dir, func(c *smarttd.Config) {
		c.API.MaxRecvQueue, c.API.SocketBuffer, c.API.RecvBackpressure = limit, 0, false
	})
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	r := openBound(t, client.New(b.Config.API.Socket), 1)
	open := make(chan struct{})
	var opened sync.Once
	t.Cleanup(func() { opened.Do(func() { close(open) }) }) // a failure must not leave the reader gated
	var mu sync.Mutex
	var all []*bytes.Buffer
	r.SetRecvWriter(func(*client.Message) io.Writer {
		mu.Lock()
		defer mu.Unlock()
		all = append(all, new(bytes.Buffer))
		return gate{open, all[len(all)-1]}
	})
	bufs := func(i int) *bytes.Buffer { // message i's, once Recv returned it
		mu.Lock()
		defer mu.Unlock()
		return all[i]
	}
	// Larger than max_recv_queue, but nothing else waits: it is queued (and held up by
	// the client, which does not read on).
	big := bytes.Repeat([]byte("big message "), 200_000)
	if _, err := s.Send(ctx(t), addrB, 1, big); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return b.API.Stats().RecvQueued >= int64(len(big)) })
	bigHeld := b.API.Stats().RecvQueued
	// Behind it: 1000 bytes wait (at max_recv_queue), the next two are dropped, and the
	// client gets one notice for both.
	for _, n := range []int{1000, 1, 1000} {
		if _, err := s.Send(ctx(t), addrB, 1, bytes.Repeat([]byte("s"), n)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return b.API.Stats().RecvOverflow == 2 })
	if st := b.API.Stats(); st.RecvQueued <= bigHeld+1000 || st.RecvQueued > bigHeld+limit || st.MsgsDelivered != 2 {
		t.Fatalf("stats %+v", st)
	}
	opened.Do(func() { close(open) })
	for i, n := range []int{len(big), 1000} {
		if m, err := r.Recv(ctx(t)); err != nil || m.Size != uint64(n) || bufs(i).Len() != n {
			t.Fatalf("message %d: %v %v", i, m, err)
		}
	}
	if !bytes.Equal(bufs(0).Bytes(), big) {
		t.Fatal("big message corrupted")
	}
	_, err := r.Recv(ctx(t))
	wantCode(t, err, api.CodeRecvOverflow, "dropped 2 messages (1001 bytes)")
	wantCode(t, err, api.CodeRecvOverflow, "api.max_recv_queue = 1400")
	// Nothing waits any more: the next message goes.
	if _, err := s.Send(ctx(t), addrB, 1, []byte("small")); err != nil {
		t.Fatal(err)
	}
	if m, err := r.Recv(ctx(t)); err != nil || bufs(2).String() != "small" {
		t.Fatalf("after an overflow: %v %v", m, err)
	}
	// The writer returns the bytes after its flush, which the client may see first.
	waitFor(t, func() bool { return b.API.Stats().RecvQueued == 0 })
	if st := b.API.Stats(); st.RecvOverflow != 2 || st.RecvQueued != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// rawSession opens a messaging session by hand and binds endpoint ep.
func rawSession(t *testing.T, path string, ep uint32) net.Conn {
	t.Helper()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("POST /v1/session HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: " + api.Protocol + "\r\n\r\n"))
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil || !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 101") {
		t.Fatalf("upgrade: %q %v", buf[:n], err)
	}
	frame := api.AppendHeader(nil, api.Header{Type: api.FrameBind, Tag: 1, Len: 4})
	conn.Write(append(frame, api.AppendEndpointPayload(ep)...))
	n, err = conn.Read(buf)
	if err != nil || n != api.HeaderLen+4 || buf[0] != api.FrameBound {
		t.Fatalf("bind: %x %v", buf[:n], err)
	}
	return conn
}

func TestVanishingClientLeaksNothing(t *testing.T) {
	a, b := daemonPair(t, nil, nil)
	// Warm up: goroutines of HTTP keep-alive and the like exist before we count.
	warm := openBound(t, client.New(a.Config.API.Socket), 99)
	warm.Close()
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()
	for i := 0; i < 20; i++ {
		conn := rawSession(t, a.Config.API.Socket, uint32(100+i))
		// Announce 1 MiB, send half of it, vanish.
		sh := api.SendHeader{To: addrB, Endpoint: 1, Size: 1 << 20}.Append(nil)
		conn.Write(append(api.AppendHeader(nil, api.Header{Type: api.FrameSend, Tag: 2, Len: uint32(len(sh))}), sh...))
		conn.Write(append(api.AppendHeader(nil, api.Header{Type: api.FrameData, Tag: 2, Len: 1 << 19}), make([]byte, 1<<19)...))
		conn.Close()
	}
	// A receiving client that vanishes while a large message is being written to it.
	rc := rawSession(t, b.Config.API.Socket, 5)
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	if _, err := s.Send(ctx(t), addrB, 5, make([]byte, 8<<20)); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	waitFor(t, func() bool { return a.API.Stats().ClientsVanishd == 20 && b.API.Stats().Sessions == 0 })
	waitFor(t, func() bool { return a.API.Stats().Sessions == 1 })
	s.Close()
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before })
	// The daemon still works, and the vanished clients' endpoints are free again.
	s2 := openBound(t, client.New(a.Config.API.Socket), 100)
	if _, err := s2.Send(ctx(t), addrB, 1, []byte("still alive")); err != nil {
		t.Fatal(err)
	}
}

func TestProtocolErrorClosesOnlyThatSession(t *testing.T) {
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), nil)
	conn := rawSession(t, a.Config.API.Socket, 3)
	conn.Write([]byte{0x77, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}) // unknown frame type
	buf := make([]byte, 512)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _ := conn.Read(buf)
	h, err := api.ParseHeader(buf[:n])
	if err != nil || h.Type != api.FrameError {
		t.Fatalf("reply %x", buf[:n])
	}
	code, text, _ := api.ParseError(buf[api.HeaderLen:n])
	if code != api.CodeProtocol || !strings.Contains(text, "unknown frame type") {
		t.Fatalf("error %d %q", code, text)
	}
	if _, err := conn.Read(buf); err == nil {
		t.Fatal("session not closed after a protocol error")
	}
	waitFor(t, func() bool { return a.API.Stats().ProtocolErrors == 1 && a.API.Stats().Sessions == 0 })
}

func TestShutdownFailsOutstandingAndTellsClient(t *testing.T) {
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), func(c *smarttd.Config) { c.ShutdownTimeout = 100_000_000 })
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	p, err := s.SendAsync(netip.MustParseAddrPort("10.0.0.9:23600"), 1, []byte("never acknowledged"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	if err := a.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("shutdown took %v", d)
	}
	_, err = p.Wait(ctx(t))
	if !errors.Is(err, client.ErrFailed) || !strings.Contains(err.Error(), "aborted") {
		t.Fatalf("outstanding message: %v, want a failure notification", err)
	}
	if _, err := os.Stat(a.Config.API.Socket); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestSendMemfdZeroCopy(t *testing.T) {
	a, b := daemonPair(t, func(c *smarttd.Config) { c.API.MaxMessage = 8 << 20 }, nil)
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	r := openBound(t, client.New(b.Config.API.Socket), 2)
	before := openFDs(t)
	want := make([]byte, 3<<20)
	for i := range want {
		want[i] = byte(i * 13)
	}
	for i := 0; i < 3; i++ {
		m, err := client.NewMessageFD(int64(len(want)))
		if err != nil {
			t.Fatal(err)
		}
		copy(m.Data, want)
		if err := m.Seal(); err != nil {
			t.Fatal(err)
		}
		p, err := s.SendFD(addrB, 2, m)
		m.Close()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(ctx(t)); err != nil {
			t.Fatal(err)
		}
		// Counted before its Sent frame went out: a client that saw it sees the counts.
		if st := a.API.Stats(); st.MsgsFD != uint64(i+1) || st.MsgsAccepted != uint64(i+1) || st.BytesAccepted != uint64((i+1)*len(want)) {
			t.Fatalf("after Sent %d: memfd %d, accepted %d (%d bytes)", i, st.MsgsFD, st.MsgsAccepted, st.BytesAccepted)
		}
		got, err := r.Recv(ctx(t))
		if err != nil || !bytes.Equal(got.Data, want) || got.FromEndpoint != 1 {
			t.Fatalf("received %d bytes, %v", len(got.Data), err)
		}
	}
	if a.API.Stats().MsgsFD != 3 {
		t.Fatalf("memfd messages %d", a.API.Stats().MsgsFD)
	}
	// Every descriptor is closed once its message completed.
	waitFor(t, func() bool { return openFDs(t) <= before })

	// Refusals: unsealed, too large; the session goes on.
	m, _ := client.NewMessageFD(100)
	p, err := s.SendFD(addrB, 2, m)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Wait(ctx(t))
	wantCode(t, err, api.CodeFD, "not sealed")
	m.Close()
	big, _ := client.NewMessageFD(9 << 20)
	big.Seal()
	p, err = s.SendFD(addrB, 2, big)
	big.Close()
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Wait(ctx(t))
	wantCode(t, err, api.CodeTooLarge, "api.max_message")
	if _, err := s.Send(ctx(t), addrB, 2, []byte("still fine")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return openFDs(t) <= before })
}

func TestSendFDWithoutDescriptorIsAProtocolError(t *testing.T) {
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), nil)
	conn := rawSession(t, a.Config.API.Socket, 3)
	sh := api.SendHeader{To: addrB, Endpoint: 1, Size: 10}.Append(nil)
	conn.Write(append(api.AppendHeader(nil, api.Header{Type: api.FrameSendFD, Tag: 2, Len: uint32(len(sh))}), sh...))
	buf := make([]byte, 512)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _ := conn.Read(buf)
	if n < api.HeaderLen || buf[0] != api.FrameError {
		t.Fatalf("reply %x", buf[:n])
	}
	code, text, _ := api.ParseError(buf[api.HeaderLen:n])
	if code != api.CodeProtocol || !strings.Contains(text, "without a descriptor") {
		t.Fatalf("error %d %q", code, text)
	}
}
