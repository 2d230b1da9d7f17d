// Package client is the Go client of smarttd's Unix-socket API: control queries over
// HTTP/JSON and messaging sessions (bind an endpoint, send messages to peers' endpoints
// with a completion or failure for each, receive messages with their sender).
package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartt-transport/smartt/transport/apitypes"
	"github.com/smartt-transport/smartt/transport/apitypes/apihttp"
	"github.com/smartt-transport/smartt/transport/bufpool"
)

// SentInfo reports a delivered message: how long it took and the connection's state at
// completion.
type SentInfo = apitypes.SentInfo

// Client talks to one daemon.
type Client struct {
	socket   string
	noDirect bool // SetDirect(false)

	mu   sync.Mutex
	idle *ctlConn // a control connection kept open for the next request
}

// New returns a client of the daemon listening on the Unix socket path socket.
func New(socket string) *Client {
	return &Client{socket: socket}
}

// Error is an error the daemon reported.
type Error struct {
	Code uint16 // apitypes.Code* of an Error frame; 0 for HTTP errors
	HTTP int    // HTTP status for control requests
	Text string
}

// Error implements error.
func (e *Error) Error() string {
	if e.HTTP != 0 {
		return fmt.Sprintf("smarttd: HTTP %d: %s", e.HTTP, e.Text)
	}
	return fmt.Sprintf("smarttd: %s (code %d)", e.Text, e.Code)
}

// ErrFailed wraps the reason of a message the daemon could not deliver.
var ErrFailed = errors.New("message failed")

// Get fetches path (e.g. "/v1/status") and decodes its JSON body into out.
func (c *Client) Get(ctx context.Context, path string, out any) error {
	resp, err := c.roundTrip(ctx, path)
	if err != nil {
		return fmt.Errorf("smarttd at %s: %w", c.socket, err)
	}
	if resp.Status != 200 {
		var e struct{ Error string }
		_ = json.Unmarshal(resp.Body, &e)
		return &Error{HTTP: resp.Status, Text: e.Error}
	}
	return json.Unmarshal(resp.Body, out)
}

// Status returns the daemon's status.
func (c *Client) Status(ctx context.Context) (st apitypes.Status, err error) {
	return st, c.Get(ctx, "/v1/status", &st)
}

// Version returns the daemon's version.
func (c *Client) Version(ctx context.Context) (v apitypes.Version, err error) {
	return v, c.Get(ctx, "/v1/version", &v)
}

// Capabilities returns what the daemon and its sockets support.
func (c *Client) Capabilities(ctx context.Context) (v apitypes.Capabilities, err error) {
	return v, c.Get(ctx, "/v1/capabilities", &v)
}

// Conns returns the daemon's live connections.
func (c *Client) Conns(ctx context.Context) (v []apitypes.Conn, err error) {
	return v, c.Get(ctx, "/v1/conns", &v)
}

// Counters returns the daemon's counters.
func (c *Client) Counters(ctx context.Context) (v apitypes.Counters, err error) {
	return v, c.Get(ctx, "/v1/counters", &v)
}

// Message is a message received from a peer.
type Message struct {
	From         netip.AddrPort // the sending daemon
	FromEndpoint uint32         // the sender's endpoint
	Endpoint     uint32         // our endpoint
	Size         uint64         // bytes
	Data         []byte         // the message (nil with SetRecvWriter); read-only when it is in the receive ring

	ring *recvRing // set when Data aliases the session's receive ring
	sess *Session
	tag  uint32
}

// InRing reports whether m.Data aliases the session's shared-memory receive ring
// (EnableRecvRing): then it is read-only, and Release must be called.
func (m *Message) InRing() bool { return m.ring != nil }

// Release gives m.Data back for reuse by later messages (large messages are read into
// recycled buffers; a message in the receive ring frees its space for the daemon);
// m.Data must not be used afterwards. Optional for messages read from the socket,
// required for messages in the ring.
func (m *Message) Release() {
	if m.ring != nil {
		m.sess.releaseRing(m, true)
		m.ring, m.Data = nil, nil
		return
	}
	bufpool.Put(m.Data)
	m.Data = nil
}

type reply struct {
	typ     uint8
	payload []byte
	err     error
}

type recvItem struct {
	msg *Message
	err error
}

// Session is a messaging session: one bound endpoint, any number of messages each way.
// Its methods may be called from several goroutines.
type Session struct {
	conn net.Conn
	br   *bufio.Reader
	wmu  sync.Mutex
	bw   *bufio.Writer
	tags atomic.Uint32
	snd  sendState // the send path's scratch (send.go), guarded by wmu

	version    int                   // the negotiated protocol version (v2.go)
	accepted   atomic.Uint64         // Accepted frames received
	onAccepted func(tag uint32)      // guarded by mu
	cancels    map[uint32]chan reply // Cancel's waiters for CancelResult frames, guarded by mu

	mu      sync.Mutex
	waiters map[uint32]chan reply
	err     error // set when the session broke
	recv    chan recvItem
	done    chan struct{}
	sink    func(m *Message) io.Writer // SetRecvWriter
	ring    *recvRing                  // EnableRecvRing, or the automatic ring (autoring.go)
	auto    autoRing                   // the automatic receive ring (autoring.go)
	ringMax int64                      // the daemon's api.max_recv_ring (RecvRingHeader); 0: no automatic ring
	// Ring releases being batched (ring.go): rel (the Release payload being built),
	// relBytes, relArmed, relClosed and relTimer are guarded by relMu, which is never held
	// across a write; relOut (the batch being written) by wmu.
	relMu     sync.Mutex
	rel       []byte
	relOut    []byte
	relBytes  int64
	relArmed  bool
	relClosed bool
	relTimer  *time.Timer
	relPend   atomic.Int64 // relBytes, for the reader's check before it blocks (lead)
	relEarly  atomic.Int64 // pending bytes the reader writes before it blocks: a sixteenth of the ring
	busyPoll  atomic.Int64 // SetBusyPoll, ns
	rx        recvState    // who reads the socket (recv.go)
	lazySent  bool         // the daemon holds Sent frames until asked (recv.go)
	fdOK      bool         // the daemon takes SendFD frames on this session (autoFD)
	fds       fdPool       // send memfds (memfd.go)
	dir       directState  // the direct path to sessions of the same daemon (direct.go)
}

// SetBusyPoll makes Recv spin for up to d (at most 1 ms; 0, the default, turns it off)
// waiting for the next message before it blocks: for latency-critical hosts with a core
// to spare, it saves the wake-up of the receiving goroutine; on a busy host it costs the
// CPU it spins (docs/datapath.md measures both).
func (s *Session) SetBusyPoll(d time.Duration) {
	s.busyPoll.Store(int64(min(max(d, 0), time.Millisecond)))
}

// SetRecvWriter makes the session stream every received message into the writer w
// returns for it (called with the message's sender and size; Data stays nil), instead of
// holding the message in memory: for large messages. Recv then returns each message
// after its last byte was written, with the writer's error if it failed.
func (s *Session) SetRecvWriter(w func(m *Message) io.Writer) {
	s.mu.Lock()
	s.sink = w
	s.mu.Unlock()
}

// SocketBuffer is the kernel send buffer a session asks for on its socket (capped by
// net.core.wmem_max): a streamed message crosses in pieces of at most this size, each a
// wake-up of the daemon's session reader, as the daemon's api.socket_buffer does the
// other way.
const SocketBuffer = 4 << 20

// Open starts a messaging session. It offers protocol versions 2 and 1 and takes the
// daemon's choice; a daemon that knows only version 1 (it answers 426 to the list) is
// asked again for version 1 alone.
func (c *Client) Open(ctx context.Context) (*Session, error) {
	s, err := c.open(ctx, apitypes.ProtocolV2+", "+apitypes.Protocol)
	var e *Error
	if errors.As(err, &e) && e.HTTP == 426 {
		s, err = c.open(ctx, apitypes.Protocol)
	}
	return s, err
}

// open starts a session offering the protocol versions of upgrade.
func (c *Client) open(ctx context.Context, upgrade string) (*Session, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.socket)
	if err != nil {
		return nil, fmt.Errorf("smarttd at %s: %w", c.socket, err)
	}
	if uc, ok := conn.(*net.UnixConn); ok {
		uc.SetWriteBuffer(SocketBuffer) // the kernel caps it at net.core.wmem_max
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	req := apihttp.Request{Method: "POST", Target: "/v1/session", Proto: "HTTP/1.1", Header: apihttp.Header{
		{Name: "Host", Value: "smarttd"}, {Name: "Connection", Value: "Upgrade"}, {Name: "Upgrade", Value: upgrade},
		{Name: "Content-Length", Value: "0"},
		{Name: apitypes.LazySentHeader, Value: "1"}}} // recv.go: Pending.Wait asks for its Sent
	var rd io.Reader = conn
	var fdr *fdConnReader
	if uc, ok := conn.(*net.UnixConn); ok && !c.noDirect {
		req.Header = append(req.Header, apihttp.Field{Name: apitypes.DirectHeader, Value: "1"}) // direct.go
		if fdr, err = newFDConnReader(uc); err != nil {                                         // the pairs' sockets come with frames
			conn.Close()
			return nil, err
		}
		rd = fdr
	}
	if _, err := conn.Write(req.Append(nil)); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(rd, 256<<10)
	resp, err := apihttp.ReadResponse(br, apihttp.ClientLimits)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("smarttd session: %w", err)
	}
	if resp.Status != 101 {
		var e struct{ Error string }
		_ = json.Unmarshal(resp.Body, &e)
		conn.Close()
		return nil, &Error{HTTP: resp.Status, Text: e.Error}
	}
	version := 1 // a daemon before version 2 names none
	if v := apitypes.ParseVersions(resp.Header.Get("Upgrade")); len(v) == 1 && v[0] <= apitypes.MaxVersion {
		version = v[0]
	}
	conn.SetDeadline(time.Time{})
	s := &Session{conn: conn, br: br, bw: bufio.NewWriterSize(conn, 256<<10),
		waiters: make(map[uint32]chan reply), recv: make(chan recvItem, 4096), done: make(chan struct{})}
	s.lazySent = resp.Header.Get(apitypes.LazySentHeader) == "1"
	if fdr != nil && version >= 2 && resp.Header.Get(apitypes.DirectHeader) == "1" {
		s.dir.on, s.dir.fdr = true, fdr
		s.dir.dests, s.dir.pairs = map[destKey]*destRoute{}, map[uint64]*directPair{}
	}
	s.version = version
	_, unix := conn.(*net.UnixConn)
	s.fdOK = unix && resp.Header.Get(apitypes.SendFDHeader) == "1"
	s.snd.fdThreshold.Store(DefaultSendFDThreshold)
	if s.fdOK { // rings need descriptors passed, as SendFD does
		s.ringMax, _ = strconv.ParseInt(resp.Header.Get(apitypes.RecvRingHeader), 10, 64)
		s.ringMax = min(max(s.ringMax, 0), maxRing)
	}
	s.auto.threshold.Store(DefaultAutoRecvRing)
	s.fds.busy, s.fds.refused = map[uint32]*sendMemfd{}, map[uint32]*sendMemfd{}
	s.initRecv()
	return s, nil
}

// Close ends the session; messages not yet completed still complete at the daemon, but
// their outcomes are no longer reported.
func (s *Session) Close() error {
	err := s.conn.Close()
	s.closeRecv()
	s.relMu.Lock()
	s.relClosed = true
	if s.relTimer != nil {
		s.relTimer.Stop()
	}
	s.relMu.Unlock()
	s.closeRing()
	s.fds.closeAll()
	s.closeDirect()
	return err
}

func (s *Session) nextTag() uint32 {
	for {
		if t := s.tags.Add(1); t != 0 {
			return t
		}
	}
}

func (s *Session) register(tag uint32) (chan reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	ch := make(chan reply, 1)
	s.waiters[tag] = ch
	return ch, nil
}

func (s *Session) unregister(tag uint32) {
	s.mu.Lock()
	delete(s.waiters, tag)
	s.mu.Unlock()
}

// Bind binds endpoint ep (0: the daemon picks a free one) and returns it. Messages peers
// send to this daemon's address and that endpoint arrive at this session.
func (s *Session) Bind(ctx context.Context, ep uint32) (uint32, error) {
	tag := s.nextTag()
	ch, err := s.register(tag)
	if err != nil {
		return 0, err
	}
	s.wmu.Lock()
	err = s.flushReleasesLocked()
	if err == nil {
		err = s.writeFrame(apitypes.FrameBind, tag, apitypes.AppendEndpointPayload(ep))
	}
	if err == nil {
		err = s.bw.Flush()
	}
	s.wmu.Unlock()
	if err != nil {
		s.unregister(tag)
		return 0, err
	}
	r, err := s.wait(ctx, tag, ch)
	if err != nil {
		return 0, err
	}
	return apitypes.ParseEndpoint(r.payload)
}

func (s *Session) writeFrame(typ uint8, tag uint32, payload []byte) error {
	var h [apitypes.HeaderLen]byte
	if _, err := s.bw.Write(apitypes.AppendHeader(h[:0], apitypes.Header{Type: typ, Tag: tag, Len: uint32(len(payload))})); err != nil {
		return err
	}
	_, err := s.bw.Write(payload)
	return err
}

func (s *Session) brokenErr(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	return err
}
