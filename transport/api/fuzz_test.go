package api

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/daemon"
)

// FuzzParse: every parser either rejects its input or decodes it into values that encode
// back to the same bytes.
func FuzzParse(f *testing.F) {
	f.Add(AppendHeader(nil, Header{Type: FrameSend, Tag: 9, Len: SendHeaderLen}))
	f.Add(SendHeader{To: netip.MustParseAddrPort("10.0.0.2:23600"), Endpoint: 3, Size: 1 << 20}.Append(nil))
	f.Add(RecvHeader{From: netip.MustParseAddrPort("[fd00::1]:9"), FromEndpoint: 1, Endpoint: 2, Size: 5}.Append(nil))
	f.Add(SentInfo{Elapsed: 1, SRTT: 2, Window: 3, Retransmit: 4}.Append(nil))
	f.Add(AppendError(nil, CodeTooLarge, "too large"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := ParseHeader(b); err == nil {
			if !bytes.Equal(AppendHeader(nil, h), b[:HeaderLen]) {
				t.Fatalf("header %x -> %+v does not round-trip", b[:HeaderLen], h)
			}
			if h.Len > MaxPayload {
				t.Fatalf("accepted length %d", h.Len)
			}
		}
		if s, err := ParseSendHeader(b); err == nil {
			if got := s.Append(nil); !bytes.Equal(got, b) {
				t.Fatalf("send header %x -> %+v -> %x", b, s, got)
			}
			if s.Endpoint == 0 || !s.To.IsValid() || s.To.Port() == 0 {
				t.Fatalf("accepted %+v", s)
			}
		}
		if r, err := ParseRecvHeader(b); err == nil {
			if r.From.Port() == 0 || !r.From.IsValid() {
				t.Fatalf("accepted %+v", r)
			}
		}
		if s, err := ParseSentInfo(b); err == nil && !bytes.Equal(s.Append(nil), b) {
			t.Fatalf("sent info %x does not round-trip", b)
		}
		if c, text, err := ParseError(b); err == nil && !bytes.Equal(AppendError(nil, c, text), b) {
			t.Fatalf("error %x does not round-trip", b)
		}
	})
}

var (
	fuzzOnce sync.Once
	fuzzSrv  *Server
)

// fuzzServer is one API server over a node on an in-memory network, shared by all inputs.
func fuzzServer(t testing.TB) *Server {
	fuzzOnce.Do(func() {
		mn := daemon.NewMemNet()
		cfg := DefaultConfig()
		cfg.MaxMessage, cfg.MaxOutstanding = 1<<20, 4<<20
		log := slog.New(slog.DiscardHandler)
		s, err := NewServer(cfg, Info{}, log)
		if err != nil {
			panic(err)
		}
		tc := transport.DefaultConfig()
		tc.ListenPort = 23600
		n, err := daemon.New(tc, mn.Socket(netip.MustParseAddrPort("10.0.0.1:23600")), daemon.Options{OnReceive: s.Deliver, Logger: log, Seed: 1})
		if err != nil {
			panic(err)
		}
		mn.Socket(netip.MustParseAddrPort("10.0.0.2:23600")) // a peer that never answers
		n.Start()
		s.node = n
		fuzzSrv = s
	})
	return fuzzSrv
}

// FuzzSession feeds arbitrary client bytes to a live session: the daemon must neither
// crash nor hang, and the session must end and be released once the client hangs up.
func FuzzSession(f *testing.F) {
	bind := append(AppendHeader(nil, Header{Type: FrameBind, Tag: 1, Len: 4}), 0, 0, 0, 9)
	sh := SendHeader{To: netip.MustParseAddrPort("10.0.0.2:23600"), Endpoint: 1, Size: 10}.Append(nil)
	send := append(AppendHeader(nil, Header{Type: FrameSend, Tag: 2, Len: uint32(len(sh))}), sh...)
	data := append(AppendHeader(nil, Header{Type: FrameData, Tag: 2, Len: 10}), []byte("0123456789")...)
	f.Add(bind)
	f.Add(append(append(bytes.Clone(bind), send...), data...))
	f.Add(append(bytes.Clone(send), data...)) // send before bind
	f.Add(append(append(bytes.Clone(bind), send...), data[:15]...))
	f.Add([]byte{0x77, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0})
	ring := append(AppendHeader(nil, Header{Type: FrameRecvRing, Tag: 3, Len: 8}), 0, 0, 0, 0, 0, 1, 0, 0)
	rel := append(AppendHeader(nil, Header{Type: FrameRelease, Len: 8}), 0, 0, 0, 1, 0, 0, 0, 2)
	f.Add(append(bytes.Clone(bind), ring...))
	f.Add(append(bytes.Clone(bind), rel...))
	f.Fuzz(func(t *testing.T, in []byte) {
		s := fuzzServer(t)
		cli, srv := net.Pipe()
		s.mu.Lock()
		s.next++
		x := newSession(s, s.next, srv, bufio.NewReader(srv))
		s.sess[x.id] = x
		s.mu.Unlock()
		s.wg.Add(2)
		go x.writeLoop()
		go x.readLoop()
		go io.Copy(io.Discard, cli) // the client reads whatever the daemon answers
		cli.SetWriteDeadline(time.Now().Add(2 * time.Second))
		cli.Write(in)
		cli.Close()
		select {
		case <-x.writerDone:
		case <-time.After(5 * time.Second):
			t.Fatal("session did not end after the client hung up")
		}
		for i := 0; i < 500; i++ {
			s.mu.Lock()
			_, live := s.sess[x.id]
			bound := x.endpoint != 0 && s.eps[x.endpoint] == x
			s.mu.Unlock()
			if !live && !bound {
				return
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatal("session or its endpoint not released")
	})
}
