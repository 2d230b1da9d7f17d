package api_test

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/client"
)

// lazySession opens a raw session with lazy Sent frames (LazySentHeader) bound to ep.
func lazySession(t *testing.T, path string, ep uint32) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.Write([]byte("POST /v1/session HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: " + api.Protocol + "\r\n" + api.LazySentHeader + ": 1\r\n\r\n"))
	br := bufio.NewReader(conn)
	var resp strings.Builder
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		resp.WriteString(l)
		if l == "\r\n" {
			break
		}
	}
	if !strings.HasPrefix(resp.String(), "HTTP/1.1 101") || !strings.Contains(resp.String(), api.LazySentHeader+": 1") {
		t.Fatalf("upgrade: %q", resp.String())
	}
	conn.Write(append(api.AppendHeader(nil, api.Header{Type: api.FrameBind, Tag: 1, Len: 4}), api.AppendEndpointPayload(ep)...))
	if h := readLazyFrame(t, conn, br); h.Type != api.FrameBound {
		t.Fatalf("bind: %+v", h)
	}
	return conn, br
}

// readFrame reads one frame (its payload discarded) within a second.
func readLazyFrame(t *testing.T, conn net.Conn, br *bufio.Reader) api.Header {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(time.Second))
	defer conn.SetReadDeadline(time.Time{})
	var hb [api.HeaderLen]byte
	if _, err := io.ReadFull(br, hb[:]); err != nil {
		t.Fatal(err)
	}
	h, err := api.ParseHeader(hb[:])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(io.Discard, br, int64(h.Len)); err != nil {
		t.Fatal(err)
	}
	return h
}

func lazySendFrames(tag uint32, ep uint32, body string) []byte {
	sh := api.SendHeader{To: addrB, Endpoint: ep, Size: uint64(len(body))}.Append(nil)
	b := append(api.AppendHeader(nil, api.Header{Type: api.FrameSend, Tag: tag, Len: uint32(len(sh))}), sh...)
	b = api.AppendHeader(b, api.Header{Type: api.FrameData, Tag: tag, Len: uint32(len(body))})
	return append(b, body...)
}

// With lazy Sent frames: before the session received anything, Sent frames come at once;
// after, a Sent frame is held until the next frame written to the client (it comes first,
// in the same write), until the client asks for it (WantSent), or for at most a
// millisecond.
func TestLazySentFrames(t *testing.T) {
	a, b := daemonPair(t, nil, nil)
	conn, br := lazySession(t, a.Config.API.Socket, 1)
	peer := openBound(t, client.New(b.Config.API.Socket), 2)
	go func() { // the peer answers every message with one back to endpoint 1
		for {
			m, err := peer.Recv(ctx(t))
			if err != nil {
				return
			}
			if string(m.Data) == "echo" {
				peer.SendAsync(addrA, 1, []byte("reply"))
			}
		}
	}()
	// Nothing received yet: Sent at once (well before the hold would end).
	conn.Write(lazySendFrames(2, 2, "quiet"))
	if h := readLazyFrame(t, conn, br); h.Type != api.FrameSent || h.Tag != 2 {
		t.Fatalf("first Sent: %+v", h)
	}
	// A request and its reply: the Sent frame is held and comes in front of the reply.
	conn.Write(lazySendFrames(3, 2, "echo"))
	if h := readLazyFrame(t, conn, br); h.Type != api.FrameSent || h.Tag != 3 {
		t.Fatalf("after a request: %+v, want its Sent (held, then written with the reply)", h)
	}
	if h := readLazyFrame(t, conn, br); h.Type != api.FrameRecv {
		t.Fatalf("after a request's Sent: %+v, want the reply", h)
	}
	readLazyFrame(t, conn, br) // its Data
	// The request's ACK was held at b (ack.complete_delay, the daemon's default): the Sent
	// frame came in front of the reply all the same, whether the ACK rode ahead of the
	// reply or (a reply later than the hold, on a slow host) left at the deadline.
	if st := b.Node.Stats(); st.AcksHeld < 2 {
		t.Fatalf("b held %d completion ACKs, want the first message's and the request's", st.AcksHeld)
	} else {
		t.Logf("b: %d completion ACKs held, %d rode with data", st.AcksHeld, st.AcksRode)
	}
	// No reply: the held Sent frame comes within about a millisecond anyway.
	conn.Write(lazySendFrames(4, 2, "quiet"))
	if h := readLazyFrame(t, conn, br); h.Type != api.FrameSent || h.Tag != 4 {
		t.Fatalf("a held Sent: %+v", h)
	}
	// Asked for: WantSent before the message completes.
	conn.Write(append(lazySendFrames(5, 2, "quiet"), api.AppendHeader(nil, api.Header{Type: api.FrameWantSent, Tag: 5})...))
	if h := readLazyFrame(t, conn, br); h.Type != api.FrameSent || h.Tag != 5 {
		t.Fatalf("a wanted Sent: %+v", h)
	}
	// A session without the header gets a WantSent as a no-op, Sent frames at once.
	raw := rawSession(t, a.Config.API.Socket, 7)
	raw.Write(api.AppendHeader(nil, api.Header{Type: api.FrameWantSent, Tag: 9}))
	raw.Write(lazySendFrames(2, 2, "quiet"))
	rbr := bufio.NewReader(raw)
	if h := readLazyFrame(t, raw, rbr); h.Type != api.FrameSent || h.Tag != 2 {
		t.Fatalf("eager session: %+v", h)
	}
}

// The Go client opens lazy sessions: Send (which waits) and SendAsync with a reply both
// complete, and Send's Sent is not held for the millisecond (it asks for it).
func TestClientLazySent(t *testing.T) {
	a, b := daemonPair(t, nil, nil)
	s := openBound(t, client.New(a.Config.API.Socket), 1)
	peer := openBound(t, client.New(b.Config.API.Socket), 2)
	go func() {
		for {
			m, err := peer.Recv(ctx(t))
			if err != nil {
				return
			}
			peer.SendAsync(m.From, m.FromEndpoint, m.Data)
		}
	}()
	for i := range 50 {
		if _, err := s.SendAsync(addrB, 2, []byte("ping")); err != nil {
			t.Fatal(err)
		}
		if m, err := s.Recv(ctx(t)); err != nil || string(m.Data) != "ping" {
			t.Fatalf("round trip %d: %v", i, err)
		}
	}
	for i := range 20 {
		if _, err := s.Send(ctx(t), addrB, 2, []byte("wait")); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
		if _, err := s.Recv(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
}
