package api

import (
	"bufio"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/daemon"
)

// limitServer is an API server over a node on an in-memory network, with sessions whose
// writers never run: what is queued stays queued, so the limits can be checked exactly.
func limitServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Socket == "" {
		cfg.Socket = "unused"
	}
	log := slog.New(slog.DiscardHandler)
	s, err := NewServer(cfg, Info{}, log)
	if err != nil {
		t.Fatal(err)
	}
	tc := transport.DefaultConfig()
	tc.ListenPort = 23600
	mn := daemon.NewMemNet()
	n, err := daemon.New(tc, mn.Socket(netip.MustParseAddrPort("10.0.0.1:23600")), daemon.Options{OnReceive: s.Deliver, Logger: log, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	s.node = n
	return s
}

func limitSession(t *testing.T, s *Server) *session {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	s.mu.Lock()
	s.next++
	x := newSession(s, s.next, a, bufio.NewReader(a))
	s.sess[x.id] = x
	s.mu.Unlock()
	if _, err := s.bind(x, 0); err != nil {
		t.Fatal(err)
	}
	return x
}

var limitFrom = RecvHeader{From: netip.MustParseAddrPort("10.0.0.2:23600"), FromEndpoint: 1, Endpoint: 1}

// Every receive limit at and beyond it: max_recv_queue per session (besides the
// session's oldest message, so any message passes an empty queue), max_recv_queue_total
// over all sessions, one coalesced drop notice per burst of drops, and the bytes returned
// when a message is written or a session ends.
func TestRecvQueueLimitsExactly(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxMessage, cfg.MaxOutstanding, cfg.MaxOutstandingTotal = 1000, 1000, 1000
	// Each message is charged its buffer's capacity plus recvOverhead (256): 600 bytes
	// are 856, 1000 are 1256, 5000 are 5256 and 4600 are 4856.
	cfg.MaxRecvQueue, cfg.MaxRecvQueueTotal, cfg.RecvBackpressure = 1256, 7368, false
	s := limitServer(t, cfg)
	x, y, z := limitSession(t, s), limitSession(t, s), limitSession(t, s)
	step := func(name string, x *session, n, want int) {
		t.Helper()
		if got := x.enqueueRecv(limitFrom, msgBody{pieces: [][]byte{make([]byte, n)}, n: int64(n)}); got != want {
			t.Fatalf("%s: %d bytes: outcome %d, want %d", name, n, got, want)
		}
	}
	step("x's oldest", x, 600, recvQueued)
	step("behind it, at max_recv_queue", x, 1000, recvQueued)
	step("beyond max_recv_queue", x, 1, recvOverflow)
	step("beyond max_recv_queue", x, 1000, recvOverflow)
	step("larger than max_recv_queue, nothing else queued; the total at 6600", y, 5000, recvQueued)
	step("beyond max_recv_queue_total", z, 1, recvTotal)
	if st := s.Stats(); st.RecvQueued != 7368 || x.info().RecvQueued != 2112 || y.info().RecvQueued != 5256 {
		t.Fatalf("queued %d (x %d, y %d), want 7368 (2112, 5256)", st.RecvQueued, x.info().RecvQueued, y.info().RecvQueued)
	}
	// x's two drops share one notice, written when the writer gets to it.
	if len(x.queue) != 3 || !x.queue[2].drops || x.dropped.n != 2 {
		t.Fatalf("x queue %d frames, %d drops", len(x.queue), x.dropped.n)
	}
	code, text, _ := ParseError(x.dropNoticeLocked())
	if code != CodeRecvOverflow || !strings.Contains(text, "dropped 2 messages (1001 bytes)") || !strings.Contains(text, "api.max_recv_queue = 1256") {
		t.Fatalf("notice %d %q", code, text)
	}
	_, text, _ = ParseError(z.dropNoticeLocked())
	if !strings.Contains(text, "dropped a message of 1 bytes") || !strings.Contains(text, "api.max_recv_queue_total = 7368") {
		t.Fatalf("notice %q", text)
	}
	// A session that ends returns its bytes; the others' stay counted.
	y.kill()
	if got := s.Stats().RecvQueued; got != 2112 {
		t.Fatalf("after y ended: %d bytes queued, want 2112", got)
	}
	x.mu.Lock()
	f := x.nextLocked() // the writer takes x's oldest, 600 bytes
	x.mu.Unlock()
	if i := x.info(); i.RecvQueued != 1256 || i.RecvWriting != 856 {
		t.Fatalf("x while writing: %+v", i)
	}
	step("behind the one being written, beyond max_recv_queue", x, 1, recvOverflow)
	x.mu.Lock()
	x.doneLocked(f) // written: its bytes are released; the 1000 bytes are x's oldest now
	x.mu.Unlock()
	if got, i := s.Stats().RecvQueued, x.info(); got != 1256 || i.RecvQueued != 1256 || i.RecvWriting != 0 {
		t.Fatalf("after a write: %d bytes queued, x %+v", got, i)
	}
	step("behind the oldest, at max_recv_queue", x, 1000, recvQueued)
	step("beyond max_recv_queue", x, 1, recvOverflow)
	step("at max_recv_queue_total", z, 4600, recvQueued)
	if got := s.Stats().RecvQueued; got != 7368 {
		t.Fatalf("%d bytes queued, want 7368", got)
	}
}

// Every outbound limit at and beyond it: max_outstanding per session and
// max_outstanding_total over all sessions; a refusal reserves nothing.
func TestOutstandingLimitsExactly(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxMessage, cfg.MaxOutstanding, cfg.MaxOutstandingTotal = 1000, 1500, 2000
	s := limitServer(t, cfg)
	x, y := limitSession(t, s), limitSession(t, s)
	to := netip.MustParseAddrPort("10.0.0.2:23600")
	for i, c := range []struct {
		x    *session
		n    uint64
		want string // "" admitted, else in the refusal
	}{
		{x, 1000, ""}, {x, 500, ""}, // at max_outstanding
		{x, 1, "api.max_outstanding = 1500"},
		{y, 500, ""}, // the total at max_outstanding_total
		{y, 1, "api.max_outstanding_total = 2000"},
		{y, 1001, "api.max_message allows 1..1000"},
	} {
		_, r := c.x.admit(SendHeader{To: to, Endpoint: 1, Size: c.n}, nil)
		switch {
		case c.want == "" && r != nil:
			t.Fatalf("step %d: %d bytes refused: %s", i, c.n, r.text)
		case c.want != "" && (r == nil || !strings.Contains(r.text, c.want)):
			t.Fatalf("step %d: %d bytes: %+v, want a refusal mentioning %q", i, c.n, r, c.want)
		}
	}
	if st := s.Stats(); st.Outstanding != 2000 || st.OutstandingRefused != 1 || st.OutstandingRefusedTotal != 1 {
		t.Fatalf("stats %+v", st)
	}
	x.release(1000)
	if _, r := y.admit(SendHeader{To: to, Endpoint: 1, Size: 1000}, nil); r != nil {
		t.Fatalf("after a completion: %s", r.text)
	}
	// A bad destination is refused before anything is reserved.
	_, err := ParseSendHeader(SendHeader{To: to, Endpoint: 0, Size: 10}.Append(nil))
	if _, r := x.admit(SendHeader{Size: 10}, err); r == nil || r.code != CodeDestination || !errors.Is(err, ErrDestination) {
		t.Fatalf("endpoint 0: %+v %v", r, err)
	}
	if got := s.Stats().Outstanding; got != 2000 {
		t.Fatalf("outstanding %d, want 2000", got)
	}
}

// ParseSendHeader separates a malformed payload (the session ends) from a destination
// nobody can be sent to (the message alone is refused).
func TestParseSendHeaderDestination(t *testing.T) {
	ok := netip.MustParseAddrPort("10.0.0.2:23600")
	for _, c := range []struct {
		to   netip.AddrPort
		ep   uint32
		want string
	}{
		{ok, 1, ""},
		{netip.MustParseAddrPort("[fd00::2]:9"), 7, ""},
		{netip.MustParseAddrPort("0.0.0.0:23600"), 1, "unspecified address"},
		{netip.MustParseAddrPort("[::]:23600"), 1, "unspecified address"},
		{netip.MustParseAddrPort("224.0.0.1:23600"), 1, "multicast address"},
		{netip.MustParseAddrPort("255.255.255.255:23600"), 1, "broadcast address"},
		{netip.MustParseAddrPort("10.0.0.2:0"), 1, "port 0"},
		{ok, 0, "endpoint 0"},
	} {
		sh, err := ParseSendHeader(SendHeader{To: c.to, Endpoint: c.ep, Size: 42}.Append(nil))
		if c.want == "" {
			if err != nil || sh.To != c.to || sh.Endpoint != c.ep || sh.Size != 42 {
				t.Errorf("%v/%d: %+v %v", c.to, c.ep, sh, err)
			}
			continue
		}
		if !errors.Is(err, ErrDestination) || !strings.Contains(err.Error(), c.want) || sh.Size != 42 {
			t.Errorf("%v/%d: %+v %v, want a destination error %q with the size decoded", c.to, c.ep, sh, err, c.want)
		}
	}
	if _, err := ParseSendHeader(make([]byte, 29)); !errors.Is(err, ErrPayload) || errors.Is(err, ErrDestination) {
		t.Errorf("short payload: %v", err)
	}
}

// The tags a lazy-Sent client may say it waits for (WantSent) are bounded: at maxWanted
// the set stops growing, a want beyond it is ignored (that message's Sent frame is held
// like any other, for at most lazySentDelay), and a Sent frame for a wanted tag is
// written at once and forgets the tag.
func TestWantSentLimit(t *testing.T) {
	s := limitServer(t, DefaultConfig())
	x := limitSession(t, s)
	x.mu.Lock()
	x.lazySent, x.recvSeq = true, 1 // a lazy session that has received a message
	x.mu.Unlock()
	for tag := uint32(1); tag <= maxWanted+10; tag++ {
		x.wantSent(tag)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.wanted) != maxWanted {
		t.Fatalf("%d wanted tags after %d WantSent frames, want the bound %d", len(x.wanted), maxWanted+10, maxWanted)
	}
	if x.holdSentLocked(maxWanted, []byte("sent")) {
		t.Fatal("the Sent frame of a wanted tag (at the bound) was held")
	}
	if _, ok := x.wanted[maxWanted]; ok || len(x.wanted) != maxWanted-1 {
		t.Fatalf("a written Sent frame's tag is still wanted (%d tags)", len(x.wanted))
	}
	if !x.holdSentLocked(maxWanted+5, []byte("sent")) || len(x.held) != 4 || !x.heldArmed {
		t.Fatalf("the Sent frame of a want beyond the bound: held %d bytes, armed %v; want it held with the timer armed", len(x.held), x.heldArmed)
	}
	x.heldTimer.Stop()
}
