//go:build linux

package api_test

import (
	"encoding/binary"
	"errors"
	"io"
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

// recvSeq receives n messages on r and checks that they carry 0..n-1 in order (their
// first 4 bytes) and come from (from, fromEP).
func recvSeq(t *testing.T, r *client.Session, n int, fromEP uint32) {
	t.Helper()
	for i := range n {
		m, err := r.Recv(ctx(t))
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if got := binary.BigEndian.Uint32(m.Data); got != uint32(i) || m.From != addrA || m.FromEndpoint != fromEP {
			t.Fatalf("message %d: got number %d from %v endpoint %d", i, got, m.From, m.FromEndpoint)
		}
		m.Release()
	}
}

// numbered is message i of size bytes.
func numbered(i, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint32(b, uint32(i))
	return b
}

// Two sessions of one daemon get a direct pair at the first message and exchange
// messages over it both ways, in order, with their true sender: the daemon carries none
// of them (msgs_local 0), makes one pair and grants it once per direction. Cancel of a
// message written to the pair says it completed. A receiver that does not read while
// 6,000 messages are sent loses none (the sender waits). A client with the direct path
// off, and a destination at another daemon, go through the daemon.
func TestDirectPath(t *testing.T) {
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), nil)
	b := startDaemon(t, mn, addrB, shortDir(t), nil)
	s1 := openBound(t, client.New(a.Config.API.Socket), 1)
	s2 := openBound(t, client.New(a.Config.API.Socket), 2)
	if !s1.Direct() || !s2.Direct() {
		t.Fatal("the direct path was not negotiated")
	}
	const n = 6000
	done := make(chan error, 1)
	go func() { // s2 reads nothing meanwhile: s1 waits for room, nothing is dropped
		for i := range n {
			p, err := s1.SendAsync(addrA, 2, numbered(i, 1000))
			if err == nil && i == 0 {
				var st client.CancelStatus
				if st, err = p.Cancel(ctx(t)); err == nil && st != client.Unknown {
					err = errors.New("cancel of a direct message: " + st.String())
				}
			}
			if err == nil {
				_, err = p.Wait(ctx(t))
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	recvSeq(t, s2, n, 1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := s2.SendAsync(addrA, 1, numbered(0, 64)); err != nil { // the other way
		t.Fatal(err)
	}
	recvSeq(t, s1, 1, 2)
	st := a.API.Stats()
	if st.MsgsLocal != 0 || st.DirectPairs != 1 || st.DirectGrants != 2 || s1.Accepted() != n {
		t.Fatalf("msgs_local %d, direct_pairs %d, direct_grants %d, accepted %d", st.MsgsLocal, st.DirectPairs, st.DirectGrants, s1.Accepted())
	}

	off := client.New(a.Config.API.Socket)
	off.SetDirect(false)
	s3 := openBound(t, off, 3)
	if s3.Direct() {
		t.Fatal("direct path negotiated though turned off")
	}
	if _, err := s3.Send(ctx(t), addrA, 2, numbered(0, 64)); err != nil {
		t.Fatal(err)
	}
	recvSeq(t, s2, 1, 3)
	rb := openBound(t, client.New(b.Config.API.Socket), 7)
	if _, err := s1.Send(ctx(t), addrB, 7, []byte("remote")); err != nil {
		t.Fatal(err)
	}
	if m, err := rb.Recv(ctx(t)); err != nil || string(m.Data) != "remote" {
		t.Fatalf("remote message: %v", err)
	}
	if st := a.API.Stats(); st.MsgsLocal != 1 || st.DirectGrants != 2 {
		t.Fatalf("msgs_local %d, direct_grants %d", st.MsgsLocal, st.DirectGrants)
	}
}

// Messages through the daemon and then over a pair arrive in order: a receiver with a
// small queue reads nothing at first, so batches (which never ask for a pair) wait at
// the daemon; the next message gets the pair at once and the rest go over it, but the
// receiver learns of the pair only behind the waiting messages. All arrive in order.
func TestDirectPathCutover(t *testing.T) {
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), func(c *smarttd.Config) {
		c.API.MaxRecvQueue, c.API.SocketBuffer = 1000, 4096
	})
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	r := openBound(t, client.New(a.Config.API.Socket), 2)
	// Batches of small messages until one waits at the daemon. The receiving client calls
	// nothing, but its idle reader (1 ms after its last call) reads: it once took a batch
	// of 3 x 256 KiB as fast as the daemon wrote it, and nothing waited. Small messages
	// come faster than it reads them (and its queue holds at most 4,096).
	time.Sleep(20 * time.Millisecond) // the idle reader runs by now
	k := 0
	for k < 8192 && a.API.Stats().LocalWaits == 0 {
		var batch []client.BatchMsg
		for i := range 64 {
			batch = append(batch, client.BatchMsg{To: addrA, Endpoint: 2, Data: numbered(k+i, 256)})
		}
		if _, err := s.SendBatch(nil, batch); err != nil {
			t.Fatal(err)
		}
		k += len(batch)
		waitLong(20*time.Millisecond, func() bool { return a.API.Stats().LocalWaits > 0 })
	}
	if !waitLong(10*time.Second, func() bool { return a.API.Stats().LocalWaits > 0 }) {
		t.Fatalf("no message waited at the daemon after %d: %+v", k, a.API.Stats())
	}
	t.Logf("%d messages through the daemon before one waited", k)
	n := k + 297
	go func() {
		for i := k; i < n; i++ {
			if _, err := s.SendAsync(addrA, 2, numbered(i, 100)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	recvSeq(t, r, n, 1)
	st := a.API.Stats()
	if st.MsgsLocal != uint64(k) || st.DirectGrants != 1 {
		t.Fatalf("msgs_local %d (want %d), direct_grants %d", st.MsgsLocal, k, st.DirectGrants)
	}
}

// A sender whose receiver's session ended gets an error for the message it writes to the
// pair, and its next message goes through the daemon (the endpoint is gone: the daemon
// accepts it and the engine finds nobody bound).
func TestDirectPathPeerGone(t *testing.T) {
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), nil)
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	r := openBound(t, client.New(a.Config.API.Socket), 2)
	if _, err := s.Send(ctx(t), addrA, 2, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	recvOne(t, r)
	r.Close()
	waitFor(t, func() bool { return a.API.Stats().Sessions == 1 })
	var err error
	for range 100 { // the first write after the close may still fit the socket's buffer
		if _, err = s.SendAsync(addrA, 2, []byte("lost")); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "direct path") {
		t.Fatalf("send to a closed pair: %v", err)
	}
	if _, err := s.SendAsync(addrA, 2, []byte("through the daemon")); err != nil {
		t.Fatal(err)
	}
}

func recvOne(t *testing.T, r *client.Session) {
	t.Helper()
	m, err := r.Recv(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	m.Release()
}

// readFrameFD reads one frame with a payload of the given length and the descriptor
// passed with it, if any (-1).
func readFrameFD(t *testing.T, conn net.Conn, payload int) (api.Header, []byte, int) {
	t.Helper()
	h, p, fd := readAnyFrameFD(t, conn)
	if len(p) != payload {
		t.Fatalf("frame 0x%02x: %d bytes of payload, want %d", h.Type, len(p), payload)
	}
	return h, p, fd
}

// readAnyFrameFD reads one frame (header and payload, sent with one sendmsg) and the
// descriptor passed with it, if any (-1).
func readAnyFrameFD(t *testing.T, conn net.Conn) (api.Header, []byte, int) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, api.HeaderLen)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := conn.(*net.UnixConn).ReadMsgUnix(b, oob)
	if err != nil || n != len(b) {
		t.Fatalf("frame: %d bytes, %v", n, err)
	}
	h, err := api.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, h.Len)
	if _, err := io.ReadFull(conn, p); err != nil {
		t.Fatalf("frame 0x%02x payload: %v", h.Type, err)
	}
	fd := -1
	if oobn > 0 {
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		if fds, _ := unix.ParseUnixRights(&msgs[0]); len(fds) == 1 {
			fd = fds[0]
		}
	}
	return h, p, fd
}

// framePair is the pair a DirectOK or DirectPeer frame names.
func framePair(t *testing.T, h api.Header, p []byte) uint64 {
	t.Helper()
	if h.Type == apitypes.FrameDirectOK {
		st, pair, err := apitypes.ParseDirectOK(p)
		if err != nil || st == apitypes.DirectRelay {
			t.Fatalf("DirectOK: status %d, %v", st, err)
		}
		return pair
	}
	dp, err := apitypes.ParseDirectPeer(p)
	if err != nil || h.Type != apitypes.FrameDirectPeer {
		t.Fatalf("frame 0x%02x: %v", h.Type, err)
	}
	return dp.Pair
}

// Two sessions asking for a pair to each other at the same moment: whichever grant
// comes first, each client's first frame naming the pair brings its end of it (a
// client learns which descriptor is whose only from that order), and the second names
// the same pair without one. Rounds of fresh sessions make the two asks overlap.
func TestDirectPathBothAsk(t *testing.T) {
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), nil)
	const direct = "smartt-msg/2\r\n" + apitypes.DirectHeader + ": 1"
	for round := range 300 {
		ep := uint32(100 + 2*round)
		x, _, _ := upgradeRaw(t, a.Config.API.Socket, direct)
		y, _, _ := upgradeRaw(t, a.Config.API.Socket, direct)
		bindRaw(t, x, ep)
		bindRaw(t, y, ep+1)
		start := make(chan struct{})
		go func() { <-start; writeFrame(y, apitypes.FrameDirect, 9, apitypes.AppendDirectReq(nil, addrA, ep)) }()
		close(start)
		writeFrame(x, apitypes.FrameDirect, 9, apitypes.AppendDirectReq(nil, addrA, ep+1))
		var pairs [4]uint64
		for i, c := range []net.Conn{x, x, y, y} {
			h, p, fd := readAnyFrameFD(t, c)
			pairs[i] = framePair(t, h, p)
			if (fd >= 0) != (i%2 == 0) {
				t.Fatalf("round %d, session %d, frame %d (0x%02x): descriptor %d", round, i/2, i%2, h.Type, fd)
			}
			if fd >= 0 {
				unix.Close(fd)
			}
		}
		if pairs[1] != pairs[0] || pairs[2] != pairs[0] || pairs[3] != pairs[0] {
			t.Fatalf("round %d: pairs %v", round, pairs)
		}
		x.Close()
		y.Close()
	}
	if st := a.API.Stats(); st.DirectPairs != 300 || st.DirectGrants != 600 {
		t.Fatalf("direct_pairs %d, direct_grants %d", st.DirectPairs, st.DirectGrants)
	}
}

// The direct path's frames from raw clients: a Direct frame without the direct path
// negotiated, or of the wrong length, is a protocol error; one naming a destination
// nobody is at, or a peer daemon's endpoint, is answered "through the daemon" (2) and
// the session goes on. Between two sessions that have it, the asker gets status 0 and a
// socket, the destination a DirectPeer frame naming the asker and the other end of it:
// bytes written to one end arrive at the other.
func TestDirectPathFrames(t *testing.T) {
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), nil)
	sock := a.Config.API.Socket
	const direct = "smartt-msg/2\r\n" + apitypes.DirectHeader + ": 1"
	for i, c := range []struct {
		offer   string
		payload []byte
	}{
		{"smartt-msg/2", apitypes.AppendDirectReq(nil, addrA, 1)},
		{"smartt-msg/1\r\n" + apitypes.DirectHeader + ": 1", apitypes.AppendDirectReq(nil, addrA, 1)},
		{direct, apitypes.AppendDirectReq(nil, addrA, 1)[:apitypes.DirectReqLen-1]},
		{direct, append(apitypes.AppendDirectReq(nil, addrA, 1), 0)},
	} {
		conn, resp, _ := upgradeRaw(t, sock, c.offer)
		if got := resp.Header.Get(apitypes.DirectHeader); (got == "1") != (i >= 2) {
			t.Fatalf("case %d: %s %q", i, apitypes.DirectHeader, got)
		}
		bindRaw(t, conn, uint32(10+i))
		writeFrame(conn, apitypes.FrameDirect, 7, c.payload)
		wantProtocolClose(t, conn, "")
	}
	x, _, _ := upgradeRaw(t, sock, direct)
	bindRaw(t, x, 20)
	y, _, _ := upgradeRaw(t, sock, direct)
	bindRaw(t, y, 21)
	for tag, to := range map[uint32]netip.AddrPort{1: netip.MustParseAddrPort("0.0.0.0:23600"), 2: addrB, 3: addrA} {
		writeFrame(x, apitypes.FrameDirect, tag, apitypes.AppendDirectReq(nil, to, 99)) // 99: bound nowhere
		h, p, fd := readFrameFD(t, x, apitypes.DirectOKLen)
		if st, _, err := apitypes.ParseDirectOK(p); err != nil || h.Type != apitypes.FrameDirectOK || h.Tag != tag || st != apitypes.DirectRelay || fd != -1 {
			t.Fatalf("direct to %v: frame 0x%02x tag %d status %d fd %d", to, h.Type, h.Tag, st, fd)
		}
	}
	writeFrame(x, apitypes.FrameDirect, 4, apitypes.AppendDirectReq(nil, addrA, 21))
	h, p, fdX := readFrameFD(t, x, apitypes.DirectOKLen)
	st, pair, err := apitypes.ParseDirectOK(p)
	if err != nil || h.Tag != 4 || st != apitypes.DirectNew || fdX < 0 {
		t.Fatalf("grant: tag %d status %d fd %d %v", h.Tag, st, fdX, err)
	}
	h, p, fdY := readFrameFD(t, y, apitypes.DirectPeerLen)
	dp, err := apitypes.ParseDirectPeer(p)
	if err != nil || h.Type != apitypes.FrameDirectPeer || fdY < 0 || dp != (apitypes.DirectPeer{Pair: pair, From: addrA, FromEndpoint: 20, Endpoint: 21}) {
		t.Fatalf("peer frame 0x%02x %+v fd %d %v", h.Type, dp, fdY, err)
	}
	defer unix.Close(fdX)
	defer unix.Close(fdY)
	if _, err := unix.Write(fdX, []byte("over the pair")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 64)
	if n, err := unix.Read(fdY, got); err != nil || string(got[:n]) != "over the pair" {
		t.Fatalf("pair: %q %v", got[:max(n, 0)], err)
	}
	if st := a.API.Stats(); st.ProtocolErrors != 4 || st.DirectPairs != 1 || st.DirectGrants != 1 {
		t.Fatalf("protocol_errors %d, direct_pairs %d, direct_grants %d", st.ProtocolErrors, st.DirectPairs, st.DirectGrants)
	}
}

// A peer that breaks the framing of a pair ends that pair only: a raw client granted a
// pair to a Go client's session writes one good message (it arrives, labelled with the
// sender the daemon named), then a header announcing 2^32+1 bytes (beyond
// apitypes.MaxDirectMsg): the Go client closes its end (the raw client reads EOF), takes
// no byte more from it, and its session goes on (another sender's message arrives).
func TestDirectPathHostilePeer(t *testing.T) {
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), nil)
	r := openBound(t, client.New(a.Config.API.Socket), 2)
	x, _, _ := upgradeRaw(t, a.Config.API.Socket, "smartt-msg/2\r\n"+apitypes.DirectHeader+": 1")
	bindRaw(t, x, 30)
	writeFrame(x, apitypes.FrameDirect, 5, apitypes.AppendDirectReq(nil, addrA, 2))
	_, p, fd := readFrameFD(t, x, apitypes.DirectOKLen)
	if st, _, err := apitypes.ParseDirectOK(p); err != nil || st != apitypes.DirectNew || fd < 0 {
		t.Fatalf("grant: status %d fd %d %v", st, fd, err)
	}
	defer unix.Close(fd)
	good := append(apitypes.AppendDirectMsg(nil, 5), "hello"...)
	if _, err := unix.Write(fd, good); err != nil {
		t.Fatal(err)
	}
	m, err := r.Recv(ctx(t))
	if err != nil || string(m.Data) != "hello" || m.From != addrA || m.FromEndpoint != 30 || m.Endpoint != 2 {
		t.Fatalf("good message: %v %+v", err, m)
	}
	bad := append(apitypes.AppendDirectMsg(nil, apitypes.MaxDirectMsg), "x"...)
	bad[15]++ // 2^32 + 1 bytes
	if _, err := unix.Write(fd, bad); err != nil {
		t.Fatal(err)
	}
	unix.SetNonblock(fd, false)
	tv := unix.NsecToTimeval(int64(5 * time.Second))
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if n, err := unix.Read(fd, make([]byte, 1)); n != 0 || err != nil {
		t.Fatalf("the receiver kept the broken pair: read %d %v", n, err)
	}
	s := openBound(t, client.New(a.Config.API.Socket), 3)
	if _, err := s.Send(ctx(t), addrA, 2, []byte("still here")); err != nil {
		t.Fatal(err)
	}
	if m, err := r.Recv(ctx(t)); err != nil || string(m.Data) != "still here" {
		t.Fatalf("after the broken pair: %v", err)
	}
}

// A session takes part in at most maxDirectPairs pairs (here 1): s1 gets one with s2;
// s1 to s3 (s1 at the bound) and s3 to s2 (s2 at it) go through the daemon, and their
// messages still arrive; s2 to s1 reuses the pair.
func TestDirectPairsBound(t *testing.T) {
	defer api.SetMaxDirectPairs(1)()
	mn := daemon.NewMemNet()
	a := startDaemon(t, mn, addrA, shortDir(t), nil)
	c := client.New(a.Config.API.Socket)
	s1, s2, s3 := openBound(t, c, 1), openBound(t, c, 2), openBound(t, c, 3)
	for _, m := range []struct {
		from *client.Session
		to   *client.Session
		ep   uint32
	}{{s1, s2, 2}, {s1, s3, 3}, {s3, s2, 2}, {s2, s1, 1}} {
		if _, err := m.from.Send(ctx(t), addrA, m.ep, []byte("x")); err != nil {
			t.Fatal(err)
		}
		recvOne(t, m.to)
	}
	if st := a.API.Stats(); st.DirectPairs != 1 || st.DirectGrants != 2 || st.MsgsLocal != 2 {
		t.Fatalf("direct_pairs %d, direct_grants %d, msgs_local %d", st.DirectPairs, st.DirectGrants, st.MsgsLocal)
	}
}

// waitLong polls cond every 10 ms until it holds (true) or d passed (false).
func waitLong(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}
