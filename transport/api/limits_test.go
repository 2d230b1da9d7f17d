package api_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// Regression tests of a review finding: "local clients can pin gigabytes and sessions
// never time out".

// sessionsOf returns a daemon's /v1/sessions.
func sessionsOf(t *testing.T, d *smarttd.Daemon) []api.SessionInfo {
	t.Helper()
	var out []api.SessionInfo
	if err := client.New(d.Config.API.Socket).Get(ctx(t), "/v1/sessions", &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A client that binds and never reads makes the daemon queue at most api.max_recv_queue
// (64 MiB by default; it was 2 GiB) behind the one message stuck in the write to it: the
// rest is dropped, counted, and the client told.
func TestClientThatNeverReadsQueuesAtMostMaxRecvQueue(t *testing.T) {
	a, b := daemonPair(t, nil, func(c *smarttd.Config) { c.API.RecvBackpressure = false })
	limit := api.DefaultConfig().MaxRecvQueue
	held := int64(4<<20) + 64<<10 // a 4 MiB message's receive chunks and overhead
	if limit > 64<<20 {
		t.Fatalf("default api.max_recv_queue %d: want tens of MiB", limit)
	}
	idle := rawSession(t, b.Config.API.Socket, 5) // binds, never reads
	defer idle.Close()
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	msg := make([]byte, 4<<20)
	n := int(limit/int64(len(msg))) + 4
	for i := range n {
		if _, err := s.Send(ctx(t), addrB, 5, msg); err != nil {
			t.Fatal(err)
		}
		for _, si := range sessionsOf(t, b) {
			if si.Endpoint == 5 && (si.RecvQueued > limit || si.RecvWriting > held) {
				t.Fatalf("after %d messages of 4 MiB: %d bytes queued (%d being written) for a client that never reads, api.max_recv_queue = %d",
					i+1, si.RecvQueued, si.RecvWriting, limit)
			}
		}
	}
	waitFor(t, func() bool { st := b.API.Stats(); return st.MsgsDelivered+st.RecvOverflow == uint64(n) })
	if st := b.API.Stats(); st.RecvOverflow == 0 || st.RecvQueued > limit+held {
		t.Fatalf("stats %+v: want drops and at most %d + %d bytes queued", st, limit, held)
	}
}

// N clients that never read make the daemon queue at most api.max_recv_queue_total over
// all of them.
func TestClientsThatNeverReadQueueAtMostMaxRecvQueueTotal(t *testing.T) {
	mn := daemon.NewMemNet()
	dir := shortDir(t)
	a := startDaemon(t, mn, addrA, dir, nil)
	const perSession, total = 256 << 10, 512 << 10
	b := startDaemon(t, mn, addrB, dir, func(c *smarttd.Config) {
		c.API.MaxMessage, c.API.MaxOutstanding, c.API.MaxOutstandingTotal = perSession, perSession, perSession
		c.API.MaxRecvQueue, c.API.MaxRecvQueueTotal = perSession, total
		c.API.SocketBuffer = 0 // the kernel's default: what the sockets take is small beside the queues
		c.API.RecvBackpressure = false
	})
	for ep := uint32(11); ep <= 14; ep++ {
		idle := rawSession(t, b.Config.API.Socket, ep) // binds, never reads
		defer idle.Close()
	}
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	msg := make([]byte, 128<<10)
	sent := 0
	for range 16 {
		for ep := uint32(11); ep <= 14; ep++ {
			if _, err := s.Send(ctx(t), addrB, ep, msg); err != nil {
				t.Fatal(err)
			}
			sent++
			if st := b.API.Stats(); st.RecvQueued > total {
				t.Fatalf("%d bytes queued, api.max_recv_queue_total = %d", st.RecvQueued, total)
			}
		}
	}
	waitFor(t, func() bool {
		st := b.API.Stats()
		return st.MsgsDelivered+st.RecvOverflow+st.RecvOverflowTotal == uint64(sent)
	})
	st := b.API.Stats()
	if st.RecvOverflowTotal == 0 || st.RecvQueued > total {
		t.Fatalf("stats %+v: want drops at max_recv_queue_total and at most %d bytes queued", st, total)
	}
	sum := int64(0)
	for _, si := range sessionsOf(t, b) {
		if si.RecvQueued > perSession {
			t.Fatalf("session %d: %d bytes queued, api.max_recv_queue = %d", si.ID, si.RecvQueued, perSession)
		}
		sum += si.RecvQueued + si.RecvWriting
	}
	if sum != st.RecvQueued {
		t.Fatalf("sessions hold %d bytes, the daemon counts %d", sum, st.RecvQueued)
	}
}

// A daemon-wide cap of accepted-not-finished bytes: a Send beyond it is refused with an
// Error (code 5) naming api.max_outstanding_total; the session goes on.
func TestMaxOutstandingTotalRefusesTheMessageOnly(t *testing.T) {
	mn := daemon.NewMemNet()
	dir := shortDir(t)
	a := startDaemon(t, mn, addrA, dir, func(c *smarttd.Config) {
		c.API.MaxMessage, c.API.MaxOutstanding, c.API.MaxOutstandingTotal = 1000, 1000, 2000
		c.Transport.MaxRetransmits = 255 // messages to nobody stay outstanding for the test
	})
	startDaemon(t, mn, addrB, dir, nil)
	c := client.New(a.Config.API.Socket)
	nobody := netip.MustParseAddrPort("10.0.0.9:23600")
	for ep := uint32(1); ep <= 2; ep++ { // two clients, 1000 bytes each: at the cap
		if _, err := openBound(t, c, ep).SendAsync(nobody, 1, make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return a.API.Stats().Outstanding == 2000 })
	s3 := openBound(t, c, 3)
	_, err := s3.Send(ctx(t), addrB, 1, []byte("x"))
	wantCode(t, err, api.CodeOutstanding, "api.max_outstanding_total = 2000")
	_, err = s3.Bind(ctx(t), 4) // the session is still there
	wantCode(t, err, api.CodeBound, "already bound")
	if st := a.API.Stats(); st.OutstandingRefusedTotal != 1 || st.Sessions != 3 || st.ProtocolErrors != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// frameBody parses the frame header hb and reads the frame's payload from conn.
func frameBody(t *testing.T, conn net.Conn, hb []byte) (api.Header, []byte) {
	t.Helper()
	h, err := api.ParseHeader(hb)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, h.Len)
	if _, err := io.ReadFull(conn, p); err != nil {
		t.Fatal(err)
	}
	return h, p
}

// readFrames reads frames from a raw session until it closes (or 5 s pass).
func readFrames(t *testing.T, conn net.Conn) (frames []api.Header, payloads [][]byte) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hb [api.HeaderLen]byte
	for {
		if _, err := io.ReadFull(conn, hb[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return frames, payloads
			}
			t.Fatalf("after %d frames: %v (session not closed)", len(frames), err)
		}
		h, p := frameBody(t, conn, hb[:])
		frames, payloads = append(frames, h), append(payloads, p)
	}
}

// A client that stops in the middle of a frame or message is disconnected after
// api.read_timeout (it was held forever), told why, and counted; a client that is merely
// silent between requests, or pauses briefly mid-frame, is not.
func TestStalledMidFrameSessionIsClosedAfterReadTimeout(t *testing.T) {
	mn := daemon.NewMemNet()
	dir := shortDir(t)
	const rt = 300 * time.Millisecond
	a := startDaemon(t, mn, addrA, dir, func(c *smarttd.Config) { c.API.ReadTimeout = config.Duration(rt) })
	startDaemon(t, mn, addrB, dir, nil)
	sh := api.SendHeader{To: addrB, Endpoint: 1, Size: 1000}.Append(nil)
	send := append(api.AppendHeader(nil, api.Header{Type: api.FrameSend, Tag: 2, Len: uint32(len(sh))}), sh...)
	data := append(api.AppendHeader(nil, api.Header{Type: api.FrameData, Tag: 2, Len: 500}), make([]byte, 500)...)
	for i, stall := range [][]byte{
		send[:7],                                 // half a frame header
		append(bytes.Clone(send), data[:100]...), // half a Data frame
		append(bytes.Clone(send), data...),       // a message missing its second Data frame
	} {
		conn := rawSession(t, a.Config.API.Socket, uint32(10+i))
		start := time.Now()
		conn.Write(stall)
		frames, payloads := readFrames(t, conn)
		el := time.Since(start)
		if len(frames) != 1 || frames[0].Type != api.FrameError || frames[0].Tag != 0 {
			t.Fatalf("stall %d: frames %+v", i, frames)
		}
		code, text, _ := api.ParseError(payloads[0])
		if code != api.CodeClosed || !strings.Contains(text, "api.read_timeout") || el < rt || el > rt+3*time.Second {
			t.Fatalf("stall %d: after %v: error %d %q", i, el, code, text)
		}
		conn.Close()
	}
	waitFor(t, func() bool {
		st := a.API.Stats()
		return st.ReadTimeouts == 3 && st.Sessions == 0 && st.Outstanding == 0
	})
	if st := a.API.Stats(); st.ClientsVanishd != 0 || st.ProtocolErrors != 0 {
		t.Fatalf("stats %+v", st)
	}
	// Silent between requests for longer than read_timeout, then a frame in two halves
	// with a pause shorter than it: the session serves it.
	conn := rawSession(t, a.Config.API.Socket, 20)
	defer conn.Close()
	time.Sleep(rt + 100*time.Millisecond)
	bind := append(api.AppendHeader(nil, api.Header{Type: api.FrameBind, Tag: 5, Len: 4}), api.AppendEndpointPayload(21)...)
	conn.Write(bind[:6])
	time.Sleep(rt / 3)
	conn.Write(bind[6:])
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hb [api.HeaderLen]byte
	if _, err := io.ReadFull(conn, hb[:]); err != nil {
		t.Fatal(err)
	}
	if h, _ := api.ParseHeader(hb[:]); h.Type != api.FrameError || h.Tag != 5 { // second bind: code 3, the session lives
		t.Fatalf("reply %+v", h)
	}
	if st := a.API.Stats(); st.ReadTimeouts != 3 || st.Sessions != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// The HTTP request that opens a session must arrive within api.header_timeout.
func TestHeaderTimeout(t *testing.T) {
	mn := daemon.NewMemNet()
	const ht = 300 * time.Millisecond
	a := startDaemon(t, mn, addrA, shortDir(t), func(c *smarttd.Config) { c.API.HeaderTimeout = config.Duration(ht) })
	dial := func() net.Conn {
		conn, err := net.Dial("unix", a.Config.API.Socket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		return conn
	}
	// Within it, even in pieces: served.
	conn := dial()
	conn.Write([]byte("GET /v1/version HTTP/1.1\r\n"))
	time.Sleep(ht / 3)
	conn.Write([]byte("Host: x\r\nConnection: close\r\n\r\n"))
	if b, err := io.ReadAll(conn); err != nil || !strings.HasPrefix(string(b), "HTTP/1.1 200") {
		t.Fatalf("request within header_timeout: %q %v", b, err)
	}
	// Beyond it: the connection is closed.
	conn = dial()
	start := time.Now()
	conn.Write([]byte("POST /v1/session HTTP/1.1\r\nHost: x\r\n")) // and nothing more
	b, err := io.ReadAll(conn)
	if el := time.Since(start); err != nil || el < ht-50*time.Millisecond || strings.Contains(string(b), "101") {
		t.Fatalf("connection closed after %v: %q %v", el, b, err)
	}
}

// With api.max_clients sessions open, a new client takes the slot of a session that
// never bound an endpoint and has been idle for api.idle_timeout (told why, code 11);
// bound sessions are never closed for it, however long they wait to receive.
func TestIdleSessionsDoNotLockOutNewClients(t *testing.T) {
	mn := daemon.NewMemNet()
	dir := shortDir(t)
	const idle = 200 * time.Millisecond
	a := startDaemon(t, mn, addrA, dir, func(c *smarttd.Config) {
		c.API.MaxClients, c.API.MaxClientsPerUser, c.API.IdleTimeout = 2, 2, config.Duration(idle)
	})
	startDaemon(t, mn, addrB, dir, nil)
	c := client.New(a.Config.API.Socket)
	s1, err := c.Open(ctx(t)) // never binds
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s1.Close() })
	openBound(t, c, 2)
	// At the limit, nobody idle long enough: refused.
	_, err = c.Open(ctx(t))
	var ae *client.Error
	if !errors.As(err, &ae) || ae.HTTP != 503 || !strings.Contains(ae.Text, "api.idle_timeout") {
		t.Fatalf("third client while the others are fresh: %v", err)
	}
	time.Sleep(idle + 50*time.Millisecond)
	s3, err := c.Open(ctx(t)) // s1 is unbound and idle
	if err != nil {
		t.Fatalf("new client locked out by an idle unbound session: %v", err)
	}
	t.Cleanup(func() { s3.Close() })
	_, err = s1.Recv(ctx(t))
	wantCode(t, err, api.CodeClosed, "idle for")
	if _, err := s3.Bind(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(idle + 50*time.Millisecond)
	if _, err := c.Open(ctx(t)); !errors.As(err, &ae) || ae.HTTP != 503 {
		t.Fatalf("a bound session waiting to receive was closed for a new client: %v", err)
	}
	if st := a.API.Stats(); st.SessionsEvicted != 1 || st.Sessions != 2 || st.ClientsRefused != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// A client that stops reading is disconnected after api.write_timeout, and what was
// queued for it is released; one that pauses for less than it is not.
func TestWriteTimeoutDisconnectsClientThatStopsReading(t *testing.T) {
	mn := daemon.NewMemNet()
	dir := shortDir(t)
	const wt = 300 * time.Millisecond
	a := startDaemon(t, mn, addrA, dir, nil)
	b := startDaemon(t, mn, addrB, dir, func(c *smarttd.Config) {
		c.API.WriteTimeout = config.Duration(wt)
		c.API.SocketBuffer = 0 // the kernel's default, so that msg fills the socket
		c.API.RecvBackpressure = false
	})
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	msg := make([]byte, 4<<20) // more than the socket buffers take
	// Pauses shorter than write_timeout: served.
	r := openBound(t, client.New(b.Config.API.Socket), 6)
	open := make(chan struct{})
	var got bytes.Buffer
	r.SetRecvWriter(func(*client.Message) io.Writer { return gate{open, &got} })
	if _, err := s.Send(ctx(t), addrB, 6, msg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(wt / 3)
	close(open)
	if m, err := r.Recv(ctx(t)); err != nil || m.Size != uint64(len(msg)) || got.Len() != len(msg) {
		t.Fatalf("a client that paused: %v %v", m, err)
	}
	// Never reads: disconnected.
	idle := rawSession(t, b.Config.API.Socket, 5)
	defer idle.Close()
	if _, err := s.Send(ctx(t), addrB, 5, msg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		st := b.API.Stats()
		return st.ClientsStalled == 1 && st.Sessions == 1 && st.RecvQueued == 0
	})
}

// A bad destination in one Send frame refuses that message only (Error code 10 with its
// tag); the session and the client's other messages go on. It closed the whole session,
// losing the outcomes of the client's other messages.
func TestBadDestinationRefusesThatMessageOnly(t *testing.T) {
	a, _, s, r := boundPair(t, nil)
	first, err := s.SendAsync(addrB, 2, []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	type bad struct {
		p    *client.Pending
		want string
	}
	var bads []bad
	for _, c := range []struct {
		to   netip.AddrPort
		ep   uint32
		want string
	}{
		{netip.MustParseAddrPort("0.0.0.0:23600"), 2, "unspecified address"},
		{netip.AddrPortFrom(addrB.Addr(), 0), 2, "port 0"},
		{addrB, 0, "endpoint 0"},
		{netip.MustParseAddrPort("239.1.1.1:23600"), 2, "multicast address"},
	} {
		p, err := s.SendAsync(c.to, c.ep, bytes.Repeat([]byte("bad"), 1000))
		if err != nil {
			t.Fatal(err)
		}
		bads = append(bads, bad{p, c.want})
	}
	m, err := client.NewMessageFD(100) // the same by memfd
	if err != nil {
		t.Fatal(err)
	}
	m.Seal()
	pfd, err := s.SendFD(netip.MustParseAddrPort("[::]:23600"), 2, m)
	m.Close()
	if err != nil {
		t.Fatal(err)
	}
	bads = append(bads, bad{pfd, "unspecified address"})
	second, err := s.SendAsync(addrB, 2, []byte("second"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*client.Pending{first, second} {
		if _, err := p.Wait(ctx(t)); err != nil {
			t.Fatalf("a good message lost to a bad one: %v", err)
		}
	}
	for _, b := range bads {
		_, err := b.p.Wait(ctx(t))
		wantCode(t, err, api.CodeDestination, b.want)
	}
	for _, want := range []string{"first", "second"} {
		if got, err := r.Recv(ctx(t)); err != nil || string(got.Data) != want {
			t.Fatalf("received %v %v, want %q", got, err, want)
		}
	}
	if st := a.API.Stats(); st.BadDestination != 5 || st.MsgsRejected != 5 || st.MsgsAccepted != 2 || st.BytesAccepted != 11 ||
		st.MsgsFD != 0 || st.ProtocolErrors != 0 || st.Sessions != 1 || st.Outstanding != 0 {
		t.Fatalf("stats %+v", st)
	}
}
