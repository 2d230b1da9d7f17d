//go:build linux

package api_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/apitypes"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// upgradeRaw asks for a session with the Upgrade header upgrade and returns the
// connection and the response (status line and headers).
func upgradeRaw(t *testing.T, path, upgrade string) (net.Conn, *http.Response, string) {
	t.Helper()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /v1/session HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", upgrade)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	// Read the response byte by byte up to its blank line: nothing of the frames after it
	// may be buffered away.
	var head []byte
	one := make([]byte, 1)
	for !strings.HasSuffix(string(head), "\r\n\r\n") {
		if _, err := conn.Read(one); err != nil {
			t.Fatalf("response %q: %v", head, err)
		}
		head = append(head, one[0])
	}
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(head))), nil)
	if err != nil {
		t.Fatal(err)
	}
	body := ""
	if resp.StatusCode != 101 {
		b := make([]byte, 4096)
		n, _ := conn.Read(b)
		body = string(b[:n])
	}
	conn.SetReadDeadline(time.Time{})
	return conn, resp, body
}

func writeFrame(conn net.Conn, typ uint8, tag uint32, payload []byte) {
	conn.Write(append(api.AppendHeader(nil, api.Header{Type: typ, Tag: tag, Len: uint32(len(payload))}), payload...))
}

func bindRaw(t *testing.T, conn net.Conn, ep uint32) {
	t.Helper()
	writeFrame(conn, api.FrameBind, 1, api.AppendEndpointPayload(ep))
	if h, _ := readFrame(t, conn); h.Type != api.FrameBound {
		t.Fatalf("bind: frame 0x%02x", h.Type)
	}
}

func sendRaw(conn net.Conn, tag uint32, to netip.AddrPort, ep uint32, data []byte) {
	writeFrame(conn, api.FrameSend, tag, api.SendHeader{To: to, Endpoint: ep, Size: uint64(len(data))}.Append(nil))
	writeFrame(conn, api.FrameData, tag, data)
}

// Version negotiation at the Upgrade: the highest version both speak, named in the 101
// response (Upgrade and Smartt-Version); none in common is 426 with the versions the
// daemon speaks; version 1 alone works as before.
func TestVersionNegotiation(t *testing.T) {
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), nil)
	for _, c := range []struct{ offer, want string }{
		{"smartt-msg/2, smartt-msg/1", "2"}, {"smartt-msg/1, smartt-msg/2", "2"}, {"smartt-msg/1", "1"},
		{"smartt-msg/2", "2"}, {"websocket, smartt-msg/3, smartt-msg/1", "1"},
	} {
		_, resp, _ := upgradeRaw(t, a.Config.API.Socket, c.offer)
		if resp.StatusCode != 101 || resp.Header.Get("Smartt-Version") != c.want || resp.Header.Get("Upgrade") != "smartt-msg/"+c.want {
			t.Fatalf("offer %q: %d, Upgrade %q, Smartt-Version %q; want version %s", c.offer, resp.StatusCode,
				resp.Header.Get("Upgrade"), resp.Header.Get("Smartt-Version"), c.want)
		}
	}
	_, resp, body := upgradeRaw(t, a.Config.API.Socket, "smartt-msg/9")
	if resp.StatusCode != 426 || resp.Header.Get("Upgrade") != "smartt-msg/2, smartt-msg/1" ||
		!strings.Contains(body, `"error": "unsupported protocol smartt-msg/9; this daemon speaks smartt-msg/1, smartt-msg/2"`) {
		t.Fatalf("unknown version: %d, Upgrade %q, body %q", resp.StatusCode, resp.Header.Get("Upgrade"), body)
	}
	s, err := client.New(a.Config.API.Socket).Open(ctx(t))
	if err != nil || s.Version() != 2 {
		t.Fatalf("Go client: version %v, %v", s, err)
	}
	s.Close()
}

// A client that lies about its version gets protocol errors (Error 1, the session
// closed) and the daemon goes on: Cancel on a version-1 session, a Cancel with a
// payload, an Accepted or CancelResult frame (the daemon's) from a client.
func TestLyingClientProtocolErrors(t *testing.T) {
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), nil)
	for i, c := range []struct {
		name, offer string
		typ         uint8
		payload     []byte
	}{
		{"Cancel on version 1", "smartt-msg/1", apitypes.FrameCancel, nil},
		{"Cancel with a payload", "smartt-msg/2", apitypes.FrameCancel, []byte{1}},
		{"Accepted from a client", "smartt-msg/2", apitypes.FrameAccepted, nil},
		{"CancelResult from a client", "smartt-msg/2", apitypes.FrameCancelResult, []byte{0}},
		{"unknown type", "smartt-msg/2", 0x0a, nil},
	} {
		conn, _, _ := upgradeRaw(t, a.Config.API.Socket, c.offer)
		bindRaw(t, conn, uint32(10+i)) // its own: the last session may still be closing
		writeFrame(conn, c.typ, 7, c.payload)
		wantProtocolClose(t, conn, "")
	}
	if n := a.API.Stats().ProtocolErrors; n != 5 {
		t.Fatalf("protocol_errors %d, want 5", n)
	}
	s := openBound(t, client.New(a.Config.API.Socket), 6) // the daemon serves
	if _, err := s.Send(ctx(t), addrA, 6, []byte("still alive")); err != nil {
		t.Fatal(err)
	}
}

// Version 2 frames of a remote message: Accepted (after its last Data frame) before its
// Sent; Cancel of a completed or unknown message says 2 after the outcome; the Go client
// sees the Accepted frames.
func TestAcceptedBeforeSent(t *testing.T) {
	mn := daemon.NewMemNet()
	dir := shortDir(t)
	a := startDaemon(t, mn, addrA, dir, nil)
	startDaemon(t, mn, addrB, dir, nil)
	r := openBound(t, client.New(addrBSocket(dir)), 2)
	conn, _, _ := upgradeRaw(t, a.Config.API.Socket, "smartt-msg/2")
	bindRaw(t, conn, 1)
	sendRaw(conn, 9, addrB, 2, []byte("accepted, then sent"))
	var got []string
	for len(got) < 2 {
		h, _ := readFrame(t, conn)
		got = append(got, fmt.Sprintf("0x%02x/%d", h.Type, h.Tag))
	}
	if strings.Join(got, " ") != "0x88/9 0x82/9" {
		t.Fatalf("frames %v, want Accepted then Sent of tag 9", got)
	}
	writeFrame(conn, apitypes.FrameCancel, 9, nil)
	writeFrame(conn, apitypes.FrameCancel, 1234, nil)
	for _, tag := range []uint32{9, 1234} {
		if h, p := readFrame(t, conn); h.Type != apitypes.FrameCancelResult || h.Tag != tag || len(p) != 1 || p[0] != apitypes.CancelUnknown {
			t.Fatalf("cancel of %d: frame 0x%02x tag %d %v, want CancelResult 2", tag, h.Type, h.Tag, p)
		}
	}
	if _, err := r.Recv(ctx(t)); err != nil {
		t.Fatal(err)
	}
	s := openBound(t, client.New(a.Config.API.Socket), 3)
	var mu sync.Mutex
	var tags []uint32
	s.SetAcceptedFunc(func(tag uint32) { mu.Lock(); tags = append(tags, tag); mu.Unlock() })
	p, err := s.SendAsync(addrB, 2, []byte("go client"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx(t)); err != nil {
		t.Fatal(err)
	}
	// A large message goes through one of the session's memfds (SendFD, not sealed
	// against writes): Accepted comes once the daemon no longer reads its pages.
	big, err := s.SendAsync(addrB, 2, make([]byte, client.DefaultSendFDThreshold))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := big.Wait(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Recv(ctx(t)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(tags) != fmt.Sprint([]uint32{p.Tag(), big.Tag()}) || s.Accepted() != 2 {
		t.Fatalf("accepted tags %v (count %d), want [%d %d]", tags, s.Accepted(), p.Tag(), big.Tag())
	}
	if a.API.Stats().MsgsFD != 1 { // the client streams when it cannot get a memfd (a loaded host)
		t.Logf("the large message was streamed, not passed in a memfd")
	}
}

func addrBSocket(dir string) string { return dir + "/" + addrB.Addr().String() + ".sock" }

// Two endpoints of one daemon talk in memory: nothing goes through the engine (no
// connection, no packet), order is kept, the sender is named as this daemon's address
// and its endpoint, and the completions are the usual ones (Accepted, Sent).
func TestLocalDelivery(t *testing.T) {
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), nil)
	c := client.New(a.Config.API.Socket)
	c.SetDirect(false) // through the daemon (direct_test.go has the direct path)
	s, r := openBound(t, c, 1), openBound(t, c, 2)
	const n = 200
	pend := make([]*client.Pending, n)
	for i := range n {
		var err error
		if pend[i], err = s.SendAsync(addrA, 2, []byte(fmt.Sprintf("local %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		m, err := r.Recv(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) != fmt.Sprintf("local %d", i) || m.From != addrA || m.FromEndpoint != 1 || m.Endpoint != 2 {
			t.Fatalf("message %d: %q from %v/%d to %d", i, m.Data, m.From, m.FromEndpoint, m.Endpoint)
		}
	}
	for i, p := range pend {
		if _, err := p.Wait(ctx(t)); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	// A message passed in a memfd (SendFD, not sealed against writes) is copied to the
	// local receiver: Accepted, then Sent, and the receiver has it whole.
	raw, _, _ := upgradeRaw(t, a.Config.API.Socket, "smartt-msg/2")
	bindRaw(t, raw, 3)
	body := patterned(5, 70000)
	fd := memfdOf(t, api.FDHeadroom+int64(len(body)), body, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	sh := api.SendHeader{To: addrA, Endpoint: 2, Size: uint64(len(body))}.Append(nil)
	frame := append(api.AppendHeader(nil, api.Header{Type: api.FrameSendFD, Tag: 4, Len: uint32(len(sh))}), sh...)
	if _, _, err := raw.(*net.UnixConn).WriteMsgUnix(frame, unix.UnixRights(fd), nil); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	for _, want := range []uint8{apitypes.FrameAccepted, api.FrameSent} {
		if h, p := readFrame(t, raw); h.Type != want || h.Tag != 4 {
			t.Fatalf("memfd message: frame 0x%02x tag %d %q, want 0x%02x", h.Type, h.Tag, p, want)
		}
	}
	if m, err := r.Recv(ctx(t)); err != nil || !bytes.Equal(m.Data, body) || m.FromEndpoint != 3 {
		t.Fatalf("local memfd message: %v", err)
	}
	st := a.API.Stats()
	if st.MsgsFD != 1 {
		t.Fatalf("memfd messages %d, want 1", st.MsgsFD)
	}
	if st.MsgsLocal != n+1 || len(a.Node.Conns(nil)) != 0 || a.Node.Stats().PacketsSent != 0 || s.Accepted() != n {
		t.Fatalf("msgs_local %d, conns %d, packets %d, accepted %d", st.MsgsLocal, len(a.Node.Conns(nil)), a.Node.Stats().PacketsSent, s.Accepted())
	}
}

// A local receiver that does not read: the sender's messages wait for room in its queue
// (never dropped), their Sent frames with them; a waiting message can be cancelled
// (CancelResult 0, Failed "cancelled", never delivered), one already queued cannot; once
// the receiver reads, the rest arrive in order.
func TestLocalBackPressureAndCancel(t *testing.T) {
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), func(c *smarttd.Config) {
		c.API.MaxRecvQueue, c.API.SocketBuffer = 1000, 4096
	})
	recv := rawSession(t, a.Config.API.Socket, 2) // reads nothing for now
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	const size = 1 << 20 // beyond any socket buffer: the first stays being written
	msg := func(i int) []byte {
		b := make([]byte, size)
		binary.BigEndian.PutUint32(b, uint32(i))
		return b
	}
	var pend []*client.Pending
	for i := range 4 {
		p, err := s.SendAsync(addrA, 2, msg(i))
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, p)
	}
	if _, err := pend[0].Wait(ctx(t)); err != nil { // queued (being written): Sent
		t.Fatal(err)
	}
	waitFor(t, func() bool { return a.API.Stats().LocalWaits >= 3 })
	time.Sleep(100 * time.Millisecond)
	if out := a.API.Stats().Outstanding; out != 3*size {
		t.Fatalf("outstanding %d bytes, want the 3 waiting messages' %d", out, 3*size)
	}
	if st, err := pend[2].Cancel(ctx(t)); err != nil || st != client.Cancelled {
		t.Fatalf("cancel of a waiting message: %v %v", st, err)
	}
	if _, err := pend[2].Wait(ctx(t)); !errors.Is(err, client.ErrCancelled) {
		t.Fatalf("cancelled message: %v", err)
	}
	if st, err := pend[0].Cancel(ctx(t)); err != nil || st != client.Unknown {
		t.Fatalf("cancel of a delivered message: %v %v", st, err)
	}
	// The receiver reads: messages 0, 1 and 3 arrive, in order, whole.
	var got []uint32
	for len(got) < 3 {
		h, p := readFrame(t, recv)
		if h.Type != api.FrameRecv {
			t.Fatalf("frame 0x%02x %q", h.Type, p)
		}
		rh, _ := api.ParseRecvHeader(p)
		var body []byte
		for uint64(len(body)) < rh.Size {
			_, d := readFrame(t, recv)
			body = append(body, d...)
		}
		got = append(got, binary.BigEndian.Uint32(body))
	}
	if fmt.Sprint(got) != "[0 1 3]" {
		t.Fatalf("received %v, want [0 1 3]", got)
	}
	for _, i := range []int{1, 3} {
		if _, err := pend[i].Wait(ctx(t)); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if st := a.API.Stats(); st.RecvOverflow != 0 || st.MsgsCancelled != 1 || st.Outstanding != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// Cancel of remote messages: one queued behind a message the engine is still sending
// (nobody answers at the peer address, so the first never finishes) has not started and
// is cancelled (its Failed frame says so); the one being sent is in flight.
func TestCancelRemoteQueued(t *testing.T) {
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), nil)
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	silent := netip.MustParseAddrPort("10.0.0.9:23600")
	first, err := s.SendAsync(silent, 1, make([]byte, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.SendAsync(silent, 1, []byte("behind it"))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := second.Cancel(ctx(t)); err != nil || st != client.Cancelled {
		t.Fatalf("cancel of a queued message: %v %v", st, err)
	}
	if _, err := second.Wait(ctx(t)); !errors.Is(err, client.ErrCancelled) {
		t.Fatalf("cancelled message: %v", err)
	}
	if st, err := first.Cancel(ctx(t)); err != nil || st != client.InFlight {
		t.Fatalf("cancel of a message being sent: %v %v", st, err)
	}
	if st := a.API.Stats(); st.MsgsCancelled != 1 || st.Outstanding != 1<<20 {
		t.Fatalf("cancelled %d, outstanding %d bytes", st.MsgsCancelled, st.Outstanding)
	}
}

// At most api.maxLocalWaiting local messages wait for room daemon-wide: a Send beyond is
// refused (Error 5, the message not accepted), and is taken again once one went in.
func TestLocalWaitingBound(t *testing.T) {
	defer api.SetMaxLocalWaiting(2)()
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), func(c *smarttd.Config) {
		c.API.MaxRecvQueue, c.API.SocketBuffer = 1000, 4096
	})
	recv := rawSession(t, a.Config.API.Socket, 2) // reads nothing for now
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	var pend []*client.Pending
	for i := range 4 { // the first is being written, two wait, the fourth is refused
		p, err := s.SendAsync(addrA, 2, make([]byte, 1<<20))
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, p)
		if i < 3 {
			waitFor(t, func() bool { return a.API.Stats().LocalWaits >= uint64(i) })
		}
	}
	_, err := pend[3].Wait(ctx(t))
	wantCode(t, err, api.CodeOutstanding, "local messages wait")
	for range 3 { // the receiver reads: the waiting ones go in
		h, p := readFrame(t, recv)
		rh, _ := api.ParseRecvHeader(p)
		for got := uint64(0); h.Type == api.FrameRecv && got < rh.Size; {
			_, d := readFrame(t, recv)
			got += uint64(len(d))
		}
	}
	for i := range 3 {
		if _, err := pend[i].Wait(ctx(t)); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
}

// Cancel of any message the engine has not started, not only the newest: with the
// network cut, a 1 MiB message is being sent and three small ones wait behind it. The
// second is cancelled (the third is taken back and queued again under a new engine ID),
// then the third through its handle from before the renumbering; the big one is in
// flight. A fourth and fifth are queued and the fourth cancelled. With the network back
// the peer gets the big one, the first and the fifth in order, and no cancelled one.
func TestCancelRemoteQueuedMiddle(t *testing.T) {
	mn := daemon.NewMemNet()
	var cut atomic.Bool
	cut.Store(true)
	mn.Mark = func(*daemon.Packet) bool { return !cut.Load() }
	a := startDaemon(t, mn, addrA, shortDir(t), nil)
	b := startDaemon(t, mn, addrB, shortDir(t), nil)
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	r := openBound(t, client.New(b.Config.API.Socket), 1)
	send := func(msg string, n int) *client.Pending {
		p, err := s.SendAsync(addrB, 1, append([]byte(msg), make([]byte, n)...))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	big := send("big", 1<<20)
	p1, p2, p3 := send("one", 0), send("two", 0), send("three", 0)
	for _, c := range []struct {
		p    *client.Pending
		want client.CancelStatus
	}{{p2, client.Cancelled}, {p3, client.Cancelled}, {big, client.InFlight}} {
		if st, err := c.p.Cancel(ctx(t)); err != nil || st != c.want {
			t.Fatalf("cancel: %v %v, want %v", st, err, c.want)
		}
	}
	p4, p5 := send("four", 0), send("five", 0)
	if st, err := p4.Cancel(ctx(t)); err != nil || st != client.Cancelled {
		t.Fatalf("cancel of four: %v %v", st, err)
	}
	for _, p := range []*client.Pending{p2, p3, p4} {
		if _, err := p.Wait(ctx(t)); !errors.Is(err, client.ErrCancelled) {
			t.Fatalf("cancelled message: %v", err)
		}
	}
	cut.Store(false)
	for _, p := range []*client.Pending{big, p1, p5} {
		if _, err := p.Wait(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"big", "one", "five"} {
		m, err := r.Recv(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(m.Data[:len(want)]); got != want {
			t.Fatalf("received %q, want %q", got, want)
		}
		m.Release()
	}
	if st := a.API.Stats(); st.MsgsCancelled != 3 || st.Outstanding != 0 {
		t.Fatalf("cancelled %d, outstanding %d bytes", st.MsgsCancelled, st.Outstanding)
	}
}
