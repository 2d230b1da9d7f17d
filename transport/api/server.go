package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/apitypes"
	"github.com/smartt-transport/smartt/transport/apitypes/apihttp"
	"github.com/smartt-transport/smartt/transport/daemon"
)

// DefaultSocket is where smarttd listens unless configured otherwise.
const DefaultSocket = "/run/smartt/smarttd.sock"

// Config configures the API server. YAML keys under `api:` in smarttd's config.
type Config struct {
	// Socket is the Unix socket path; its directory is created, a stale socket replaced.
	Socket string `yaml:"socket" json:"socket"`
	// Group, if set, owns the socket (mode 0660), so its members may use the daemon.
	Group string `yaml:"group" json:"group"`
	// MaxMessage is the largest message a client may send, bytes (1..1 GiB).
	MaxMessage int64 `yaml:"max_message" json:"max_message" unit:"bytes"`
	// MaxOutstanding bounds the bytes of a client's messages accepted and not yet
	// delivered or failed (max_message..1 TiB); a Send beyond it is refused (code 5).
	MaxOutstanding int64 `yaml:"max_outstanding" json:"max_outstanding" unit:"bytes"`
	// MaxOutstandingTotal bounds the same bytes over all clients together
	// (max_outstanding..1 TiB); a Send beyond it is refused (code 5).
	MaxOutstandingTotal int64 `yaml:"max_outstanding_total" json:"max_outstanding_total" unit:"bytes"`
	// MaxRecvQueue bounds the bytes of received messages queued for one client besides
	// its oldest (the one being written, or next to be) (1..1 TiB); beyond it messages
	// are dropped and the client is told (code 7). So a message of any size passes when
	// nothing else is queued, and a client that never reads pins one message and this.
	MaxRecvQueue int64 `yaml:"max_recv_queue" json:"max_recv_queue" unit:"bytes"`
	// MaxRecvQueueTotal bounds the bytes of received messages queued or being written
	// over all clients together (max(max_recv_queue, max_message)..1 TiB); beyond it
	// messages are dropped and their clients told (code 7).
	MaxRecvQueueTotal int64 `yaml:"max_recv_queue_total" json:"max_recv_queue_total" unit:"bytes"`
	// RecvBackpressure (default true) never drops a received message: a session whose
	// queue is full has new messages for it refused at their first packet (the engine's
	// receiver-not-ready, backpressure.go) until its client catches up, and a client that
	// is slow to read or release is never disconnected for it while its socket is open.
	// False: beyond the queue limits messages are dropped (code 7), and a client that
	// takes nothing for write_timeout is disconnected.
	RecvBackpressure bool `yaml:"recv_backpressure" json:"recv_backpressure"`
	// MaxClients bounds concurrent messaging sessions (1..65536).
	MaxClients int `yaml:"max_clients" json:"max_clients"`
	// MaxClientsPerUser bounds the sessions of one user (the uid of the client's peer
	// credentials; root included) (0: half of max_clients, at least 1; else
	// 1..max_clients), so that one user cannot take every slot. Sessions whose peer has
	// no credentials count as one user.
	MaxClientsPerUser int `yaml:"max_clients_per_user" json:"max_clients_per_user"`
	// MaxControlConns bounds the open control connections, those not upgraded to a
	// session (1..65536): each holds a goroutine and a read buffer until it closes or
	// idle_timeout passes. A connection beyond it is answered 503 and closed (counter
	// control_refused); sessions are bounded by max_clients instead.
	MaxControlConns int `yaml:"max_control_conns" json:"max_control_conns"`
	// MaxRecvRing bounds the shared-memory receive ring a session may map (RecvRing
	// frame), bytes (0: rings refused; else 4 KiB..1 GiB). All rings together map at most
	// max_clients times this.
	MaxRecvRing int64 `yaml:"max_recv_ring" json:"max_recv_ring" unit:"bytes"`
	// DirectWrites lets the goroutine that completes or delivers a message write a small
	// frame (a received message up to 16 KiB, its RecvAt descriptor, a Sent frame) to an
	// idle client itself instead of waking the session's writer: fewer hand-offs on the
	// latency path (default true; false for comparison).
	DirectWrites bool `yaml:"direct_writes" json:"direct_writes"`
	// DirectReads lets a session read the rest of a Data frame straight into the
	// message's buffer with one readv (the next frame header into the read buffer behind
	// it) instead of through its read buffer, and hand the messages of a burst of frames
	// (a client's SendBatch) to the engine for one batched socket write (default true;
	// false, the former session reads, for comparison).
	DirectReads bool `yaml:"direct_reads" json:"direct_reads"`
	// SocketBuffer is the kernel send buffer of each session's socket, bytes (0: the
	// kernel's default, net.core.wmem_default; else 4 KiB..64 MiB). A received message
	// crosses the socket in pieces of at most this size, each a wake-up of the client
	// and of the session's writer, so a larger buffer costs fewer of both per byte.
	// Set with SO_SNDBUFFORCE where the daemon may (CAP_NET_ADMIN), else SO_SNDBUF,
	// which the kernel caps at net.core.wmem_max. Bounds the kernel memory a client that
	// stops reading pins until api.write_timeout: max_clients times this in all.
	SocketBuffer int64 `yaml:"socket_buffer" json:"socket_buffer" unit:"bytes"`
	// HeaderTimeout bounds reading an HTTP request, the Upgrade included (10ms..10m).
	HeaderTimeout config.Duration `yaml:"header_timeout" json:"header_timeout"`
	// ReadTimeout bounds every frame of a session once its first byte arrived, and the
	// wait for each next Data frame of a message; a client that stalls there is
	// disconnected (10ms..10m).
	ReadTimeout config.Duration `yaml:"read_timeout" json:"read_timeout"`
	// WriteTimeout disconnects a client that takes no bytes of a frame written to it for
	// this long (it stopped reading), and bounds control responses (10ms..1h).
	WriteTimeout config.Duration `yaml:"write_timeout" json:"write_timeout"`
	// IdleTimeout: when max_clients (or the user's max_clients_per_user) sessions are
	// open and a new client arrives, the session that never bound an endpoint and has
	// been idle longest (nothing outstanding, nothing queued, no frame in progress) for at
	// least this long is closed to make room; a bound session is never evicted. Also
	// closes idle control connections (10ms..24h).
	IdleTimeout config.Duration `yaml:"idle_timeout" json:"idle_timeout"`
}

// PerUser is the effective max_clients_per_user.
func (c *Config) PerUser() int {
	if c.MaxClientsPerUser > 0 {
		return c.MaxClientsPerUser
	}
	return max(c.MaxClients/2, 1)
}

// DefaultConfig returns the API defaults.
func DefaultConfig() Config {
	return Config{Socket: DefaultSocket, MaxMessage: 1 << 30,
		MaxOutstanding: 2 << 30, MaxOutstandingTotal: 4 << 30,
		MaxRecvQueue: 64 << 20, MaxRecvQueueTotal: 2 << 30, RecvBackpressure: true, MaxClients: 512, MaxControlConns: 256, MaxRecvRing: 256 << 20, DirectWrites: true, DirectReads: true,
		SocketBuffer:  DefaultSocketBuffer,
		HeaderTimeout: config.Duration(10 * time.Second), ReadTimeout: config.Duration(10 * time.Second),
		WriteTimeout: config.Duration(30 * time.Second), IdleTimeout: config.Duration(30 * time.Second)}
}

// Validate checks every field and names the offending one with its allowed range.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	const tib = int64(1) << 40
	if c.Socket == "" {
		bad("api.socket: must be a path")
	}
	if c.MaxMessage < 1 || c.MaxMessage > 1<<30 {
		bad("api.max_message = %d: must be in 1..%d bytes", c.MaxMessage, 1<<30)
	}
	if c.MaxOutstanding < c.MaxMessage || c.MaxOutstanding > tib {
		bad("api.max_outstanding = %d: must be in max_message (%d)..%d bytes", c.MaxOutstanding, c.MaxMessage, tib)
	}
	if c.MaxOutstandingTotal < c.MaxOutstanding || c.MaxOutstandingTotal > tib {
		bad("api.max_outstanding_total = %d: must be in max_outstanding (%d)..%d bytes", c.MaxOutstandingTotal, c.MaxOutstanding, tib)
	}
	if c.MaxRecvQueue < 1 || c.MaxRecvQueue > tib {
		bad("api.max_recv_queue = %d: must be in 1..%d bytes", c.MaxRecvQueue, tib)
	}
	if lo := max(c.MaxRecvQueue, c.MaxMessage); c.MaxRecvQueueTotal < lo || c.MaxRecvQueueTotal > tib {
		bad("api.max_recv_queue_total = %d: must be in max(max_recv_queue, max_message) (%d)..%d bytes", c.MaxRecvQueueTotal, lo, tib)
	}
	if c.MaxClients < 1 || c.MaxClients > 1<<16 {
		bad("api.max_clients = %d: must be in 1..65536", c.MaxClients)
	}
	if c.MaxClientsPerUser < 0 || c.MaxClientsPerUser > c.MaxClients {
		bad("api.max_clients_per_user = %d: must be 0 (half of max_clients) or in 1..max_clients (%d)", c.MaxClientsPerUser, c.MaxClients)
	}
	if c.MaxControlConns < 1 || c.MaxControlConns > 1<<16 {
		bad("api.max_control_conns = %d: must be in 1..65536", c.MaxControlConns)
	}
	if c.MaxRecvRing != 0 && (c.MaxRecvRing < minRing || c.MaxRecvRing > maxRing) {
		bad("api.max_recv_ring = %d: must be 0 (rings off) or in %d..%d bytes", c.MaxRecvRing, minRing, maxRing)
	}
	if c.SocketBuffer != 0 && (c.SocketBuffer < minSocketBuffer || c.SocketBuffer > maxSocketBuffer) {
		bad("api.socket_buffer = %d: must be 0 (the kernel's default) or in %d..%d bytes", c.SocketBuffer, minSocketBuffer, maxSocketBuffer)
	}
	for _, d := range []struct {
		name     string
		v        config.Duration
		min, max time.Duration
	}{{"header_timeout", c.HeaderTimeout, 10 * time.Millisecond, 10 * time.Minute},
		{"read_timeout", c.ReadTimeout, 10 * time.Millisecond, 10 * time.Minute},
		{"write_timeout", c.WriteTimeout, 10 * time.Millisecond, time.Hour},
		{"idle_timeout", c.IdleTimeout, 10 * time.Millisecond, 24 * time.Hour}} {
		if time.Duration(d.v) < d.min || time.Duration(d.v) > d.max {
			bad("api.%s = %v: must be in %s..%s", d.name, d.v, shortDuration(d.min), shortDuration(d.max))
		}
	}
	return errors.Join(errs...)
}

// shortDuration formats d without zero minor units: "10m", "1h" rather than "10m0s", "1h0m0s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Info is what the control endpoints report besides the node's own state.
type Info struct {
	Version  string
	Listen   netip.AddrPort
	Config   any        // served at /v1/config
	Caps     func() any // socket capabilities, served in /v1/capabilities
	Counters func() any // socket counters, served in /v1/counters
	// MemoryBound is the daemon's worst-case memory, MemoryLimit what it must fit (0:
	// none), served in /v1/status.
	MemoryBound, MemoryLimit int64
}

// Stats are the API server's counters (apitypes.Stats).
type Stats = apitypes.Stats

// Server serves the API on a Unix socket for one node.
type Server struct {
	cfg  Config
	info Info
	log  *slog.Logger
	node *daemon.Node

	ln      net.Listener
	mux     map[string]route      // control paths (control.go)
	ctlMu   sync.Mutex            // guards ctl
	ctl     map[*ctlConn]struct{} // open control connections, not yet upgraded
	ctlCap  ctlCap                // connections refused at max_control_conns (control.go)
	wg      sync.WaitGroup
	mu      sync.Mutex
	sess    map[uint64]*session
	eps     map[uint32]*session
	perUser map[int64]int // open sessions by user (userKey)
	own     ownAddrs      // this daemon's own addresses: Sends to them go to local endpoints (local.go)
	next    uint64
	nextEP  uint32
	closing atomic.Bool
	stop    context.Context // ended by Close: sessions closing on their own stop waiting
	cancel  context.CancelFunc

	recvTotal atomic.Int64 // bytes of received messages queued for all sessions
	outTotal  atomic.Int64 // bytes accepted and not yet finished, all sessions

	sessionsTotal, clientsRefused, msgsAccepted, bytesAccepted, msgsRejected atomic.Uint64
	msgsDelivered, bytesDelivered, undeliverable, recvOverflow, badEnvelope  atomic.Uint64
	protocolErrors, vanished, fdMsgs, stalled                                atomic.Uint64
	evicted, badDestination, outstandingRefused, outstandingRefusedTotal     atomic.Uint64
	recvOverflowTotal, readTimeouts                                          atomic.Uint64
	ringMsgs, ringBytes, ringFallback, ringRefused, ringBadReleases          atomic.Uint64
	ringPlaced, recvPaused, ringDisplaced                                    atomic.Uint64
	msgsLocal, localWaits, msgsCancelled, refusedUser                        atomic.Uint64
	directPairs, directGrants                                                atomic.Uint64
	pairSeq                                                                  uint64 // direct pairs made, guarded by mu (direct.go)
	ringSessions                                                             atomic.Int64
	localWaiting                                                             atomic.Int64 // local messages waiting for room (local.go)

	directMu sync.Mutex // one direct-path grant at a time (direct.go)

	placeMu  sync.Mutex
	placeSeq uint64
	places   map[uint64]placement // slots the engine receives messages into (Place)
}

// NewServer returns a server; give its Deliver method to the node as OnReceive, then call
// Start with the node.
func NewServer(cfg Config, info Info, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	stop, cancel := context.WithCancel(context.Background())
	return &Server{cfg: cfg, info: info, log: log, sess: make(map[uint64]*session),
		eps: make(map[uint32]*session), ctl: make(map[*ctlConn]struct{}), perUser: make(map[int64]int), nextEP: minChosenEP, stop: stop, cancel: cancel, places: make(map[uint64]placement)}, nil
}

// PeerCred is the identity of a client process (apitypes.PeerCred).
type PeerCred = apitypes.PeerCred

func peerCred(c net.Conn) (PeerCred, bool) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return PeerCred{}, false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return PeerCred{}, false
	}
	var cred PeerCred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = sockPeerCred(fd) }); err != nil || cerr != nil {
		return PeerCred{}, false
	}
	return cred, true
}

// Listen prepares the socket path (directory created, a stale socket replaced, mode 0660,
// group) and listens on it.
func Listen(cfg Config) (net.Listener, error) {
	path := cfg.Socket
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("api.socket %s: %w", path, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("api.socket %s: exists and is not a socket; not replacing it", path)
		}
		if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
			c.Close()
			return nil, fmt.Errorf("api.socket %s: another daemon is listening there", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("api.socket %s: removing stale socket: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("api.socket %s: %w", path, err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("api.socket %s: chmod: %w", path, err)
	}
	if cfg.Group != "" {
		g, err := user.LookupGroup(cfg.Group)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("api.group %q: %w", cfg.Group, err)
		}
		gid, _ := strconv.Atoi(g.Gid)
		if err := os.Chown(path, -1, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("api.group %q: chown %s: %w", cfg.Group, path, err)
		}
	}
	return ln, nil
}

// Start listens on the configured socket and serves node.
func (s *Server) Start(node *daemon.Node) error {
	ln, err := Listen(s.cfg)
	if err != nil {
		return err
	}
	s.Serve(ln, node)
	return nil
}

// Serve serves node on ln (already listening) in the background.
func (s *Server) Serve(ln net.Listener, node *daemon.Node) {
	s.node, s.ln = node, ln
	s.own = newOwnAddrs(s.info.Listen)
	s.mux = s.routes()
	s.wg.Add(1)
	go s.serveControl(ln)
}

// Addr returns the socket path.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// BeginShutdown stops accepting clients and new messages; sessions stay open so that
// completions and failures still reach their clients.
func (s *Server) BeginShutdown() {
	s.closing.Store(true)
	if s.ln != nil {
		s.ln.Close()
	}
	s.closeControl(true) // idle control connections; busy ones close after their response, sessions stay
}

// Close ends every session after its queued frames are written (bounded by ctx).
func (s *Server) Close(ctx context.Context) {
	s.closing.Store(true)
	if s.ln != nil {
		s.ln.Close()
	}
	s.closeControl(false)
	s.mu.Lock()
	list := make([]*session, 0, len(s.sess))
	for _, x := range s.sess {
		list = append(list, x)
	}
	s.mu.Unlock()
	for _, x := range list {
		x.drain(ctx)
	}
	s.cancel() // sessions evicted or closing on their own: close them now
	s.wg.Wait()
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	n := int64(len(s.sess))
	s.mu.Unlock()
	return Stats{Sessions: n, Outstanding: s.outTotal.Load(), RecvQueued: s.recvTotal.Load(),
		SessionsTotal: s.sessionsTotal.Load(), ClientsRefused: s.clientsRefused.Load(), SessionsEvicted: s.evicted.Load(),
		MsgsAccepted: s.msgsAccepted.Load(), BytesAccepted: s.bytesAccepted.Load(), MsgsRejected: s.msgsRejected.Load(),
		BadDestination: s.badDestination.Load(), OutstandingRefused: s.outstandingRefused.Load(),
		OutstandingRefusedTotal: s.outstandingRefusedTotal.Load(),
		MsgsDelivered:           s.msgsDelivered.Load(), BytesDelivered: s.bytesDelivered.Load(),
		Undeliverable: s.undeliverable.Load(), RecvOverflow: s.recvOverflow.Load(), RecvOverflowTotal: s.recvOverflowTotal.Load(),
		BadEnvelope: s.badEnvelope.Load(), ProtocolErrors: s.protocolErrors.Load(), ReadTimeouts: s.readTimeouts.Load(),
		ClientsVanishd: s.vanished.Load(), MsgsFD: s.fdMsgs.Load(), ClientsStalled: s.stalled.Load(),
		RingSessions: s.ringSessions.Load(), RingMsgs: s.ringMsgs.Load(), RingBytes: s.ringBytes.Load(),
		RingFallback: s.ringFallback.Load(), RingRefused: s.ringRefused.Load(), RingBadReleases: s.ringBadReleases.Load(),
		RingPlaced: s.ringPlaced.Load(), RecvPaused: s.recvPaused.Load(), RingDisplaced: s.ringDisplaced.Load(),
		MsgsLocal: s.msgsLocal.Load(), LocalWaits: s.localWaits.Load(),
		MsgsCancelled: s.msgsCancelled.Load(), ClientsRefusedUser: s.refusedUser.Load(),
		DirectPairs: s.directPairs.Load(), DirectGrants: s.directGrants.Load(),
		ControlConns: s.controlConns(), ControlRefused: s.ctlCap.refused.Load()}
}

// reserveRecv adds n bytes to the daemon-wide receive queue unless that would exceed
// max_recv_queue_total; it returns the bytes queued before.
func (s *Server) reserveRecv(n int64) (int64, bool) {
	for {
		cur := s.recvTotal.Load()
		if cur+n > s.cfg.MaxRecvQueueTotal {
			return cur, false
		}
		if s.recvTotal.CompareAndSwap(cur, cur+n) {
			return cur, true
		}
	}
}

// Deliver routes a received message to the session bound to its endpoint. It is the
// node's OnReceive: it never blocks.
func (s *Server) Deliver(r daemon.Received) {
	if r.Placed != 0 {
		s.deliverPlaced(r.From, r.Placed)
		return
	}
	var body msgBody
	head := r.Data
	if r.Chunks != nil {
		body = msgBody{pieces: r.Chunks, chunks: true}
		for _, c := range r.Chunks {
			body.n += int64(len(c))
		}
		head = r.Chunks[0] // the first chunk holds min(RecvChunk, size) bytes
	} else {
		body = msgBody{pieces: [][]byte{r.Data}, n: int64(len(r.Data))}
	}
	dst, src, ok := parseEnvelope(head)
	if !ok {
		s.badEnvelope.Add(1)
		body.release()
		return
	}
	body.skip, body.n = envelopeLen, body.n-envelopeLen
	s.mu.Lock()
	x := s.eps[dst]
	s.mu.Unlock()
	if x == nil {
		s.undeliverable.Add(1)
		body.release()
		return
	}
	h := RecvHeader{From: r.From, FromEndpoint: src, Endpoint: dst, Size: uint64(body.n)}
	switch x.enqueueRecv(h, body) {
	case recvGone:
		s.undeliverable.Add(1)
		body.release()
		return
	case recvOverflow:
		s.recvOverflow.Add(1)
		body.release()
		return
	case recvTotal:
		s.recvOverflowTotal.Add(1)
		body.release()
		return
	}
	s.msgsDelivered.Add(1)
	s.bytesDelivered.Add(uint64(body.n))
}

// Status is the body of GET /v1/status (apitypes.Status).
type Status = apitypes.Status

func (s *Server) handleStatus(r *ctlReq) {
	r.json(200, Status{Version: s.info.Version, PID: os.Getpid(), Listen: s.info.Listen.String(),
		UptimeS:     time.Since(s.node.Started()).Seconds(),
		Connections: len(s.node.Conns(nil)), Sessions: s.Stats().Sessions, Pending: s.node.Pending(),
		ShuttingDown: s.closing.Load(), MemoryBound: s.info.MemoryBound, MemoryLimit: s.info.MemoryLimit})
}

// Version is the body of GET /v1/version (apitypes.Version).
type Version = apitypes.Version

func (s *Server) handleVersion(r *ctlReq) {
	r.json(200, Version{Version: s.info.Version, Go: runtime.Version(), Protocol: apitypes.ProtocolV2,
		Protocols: []string{apitypes.ProtocolV2, Protocol}, Wire: 1})
}

// Capabilities is the body of GET /v1/capabilities.
type Capabilities struct {
	Socket     any      `json:"socket"`
	CC         []string `json:"cc"`
	LB         []string `json:"lb"`
	Protocol   string   `json:"protocol"`
	MaxPayload int      `json:"max_frame_payload"`
	Limits     Config   `json:"limits"`
}

func (s *Server) handleCaps(r *ctlReq) {
	c := Capabilities{CC: transport.CCNames(), LB: transport.LBNames(), Protocol: Protocol,
		MaxPayload: MaxPayload, Limits: s.cfg}
	if s.info.Caps != nil {
		c.Socket = apitypes.SnakeJSON(s.info.Caps())
	}
	r.json(200, c)
}

// Conn is one connection in GET /v1/conns (apitypes.Conn).
type Conn = apitypes.Conn

func (s *Server) handleConns(r *ctlReq) {
	cfg := s.node.Config()
	infos := s.node.Conns(nil)
	out := make([]Conn, 0, len(infos))
	for _, c := range infos {
		out = append(out, Conn{ID: fmt.Sprintf("%016x", uint64(c.ID)), Peer: c.Peer.String(), Initiator: c.Initiator,
			CC: cfg.CC, LB: cfg.LB, SRTT: time.Duration(c.SRTT), RTO: time.Duration(c.RTO), Window: c.Window, PacingRate: c.PacingRate,
			InFlight: c.InFlight, QueuedMsgs: c.QueuedMsgs, RecvBuffers: c.RecvBuffers, BytesAcked: c.BytesAcked, BytesReceived: c.BytesReceived, Closing: c.Closing,
			Freezing: c.Freezing, Freezes: c.FreezeEpisodes, PathHops: c.PathHops})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Peer+out[i].ID < out[j].Peer+out[j].ID })
	r.json(200, out)
}

func (s *Server) handleConfig(r *ctlReq) {
	r.json(200, s.info.Config)
}

// Counters is the body of GET /v1/counters (apitypes.Counters on the client side). It
// encodes with snake_case keys throughout, and the RTT histogram's bucket bounds.
type Counters struct {
	Engine transport.Stats
	API    Stats
	Socket any
}

// MarshalJSON writes the counters as apitypes.Counters reads them.
func (c Counters) MarshalJSON() ([]byte, error) {
	eng, _ := apitypes.SnakeJSON(c.Engine).(map[string]any)
	bounds := make([]int64, transport.RTTBuckets)
	for i := range bounds {
		bounds[i] = transport.RTTBucketBound(i)
	}
	if eng != nil {
		eng["rtt_hist_bounds_ns"] = bounds
	}
	return json.Marshal(struct {
		Engine any   `json:"engine"`
		API    Stats `json:"api"`
		Socket any   `json:"socket,omitempty"`
	}{eng, c.API, apitypes.SnakeJSON(c.Socket)})
}

func (s *Server) handleCounters(r *ctlReq) {
	c := Counters{Engine: s.node.Stats(), API: s.Stats()}
	if s.info.Counters != nil {
		c.Socket = s.info.Counters()
	}
	r.json(200, c)
}

// SessionInfo is one session in GET /v1/sessions (apitypes.SessionInfo).
type SessionInfo = apitypes.SessionInfo

func (s *Server) handleSessions(r *ctlReq) {
	asker, hasCred := r.c.cred, r.c.hasCred
	s.mu.Lock()
	out := make([]SessionInfo, 0, len(s.sess))
	for _, x := range s.sess {
		si := x.info()
		if si.Cred != nil && !(hasCred && (asker.UID == 0 || asker.UID == si.Cred.UID)) {
			si.Cred = nil // another user's process: its pid, uid and gid are not the asker's to see
		}
		out = append(out, si)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	r.json(200, out)
}

// versionsSpoken is the Upgrade header of a 426 answer: every version, highest first.
var versionsSpoken = apitypes.ProtocolV2 + ", " + Protocol

// negotiate picks the highest protocol version the Upgrade header lists and this daemon
// speaks; 0 when none.
func negotiate(upgrade string) int {
	best := 0
	for _, v := range apitypes.ParseVersions(upgrade) {
		if v <= apitypes.MaxVersion && v > best {
			best = v
		}
	}
	return best
}

func (s *Server) handleSession(r *ctlReq) {
	up := r.Header.Get("Upgrade")
	version := negotiate(up)
	if version == 0 {
		r.hdr = append(r.hdr, apihttp.Field{Name: "Upgrade", Value: versionsSpoken})
		if up == "" {
			up = "(none)"
		}
		r.errorf(426, "unsupported protocol %s; this daemon speaks %s, %s", up, Protocol, apitypes.ProtocolV2)
		return
	}
	if s.closing.Load() {
		r.errorf(503, "daemon is shutting down")
		return
	}
	cred, hasCred := r.c.cred, r.c.hasCred
	user := userKey(cred, hasCred)
	s.mu.Lock()
	if why := s.admitLocked(user); why != "" {
		s.mu.Unlock()
		s.clientsRefused.Add(1)
		r.errorf(503, "%s; try again later", why)
		return
	}
	s.next++
	id := s.next
	s.mu.Unlock()
	r.hijacked = true // the connection is the session's from here, or closed
	s.untrack(r.c)
	conn := r.c.conn
	conn.SetDeadline(time.Time{}) // the control connection's; the session sets its own
	if s.cfg.SocketBuffer > 0 {
		SetSendBuffer(conn, int(s.cfg.SocketBuffer))
	}
	x := newSession(s, id, conn, r.c.br)
	x.lazySent = r.Header.Get(LazySentHeader) == "1"
	x.directOK = x.fdr != nil && version >= 2 && r.Header.Get(apitypes.DirectHeader) == "1"
	x.version, x.user = version, user
	if hasCred {
		x.cred = &cred
	}
	s.mu.Lock()
	if why := s.admitLocked(user); why != "" { // raced with another upgrade
		s.mu.Unlock()
		s.clientsRefused.Add(1)
		conn.SetWriteDeadline(time.Now().Add(time.Duration(s.cfg.WriteTimeout)))
		conn.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
		conn.Close()
		return
	}
	s.sess[id] = x
	s.perUser[user]++
	s.mu.Unlock()
	s.sessionsTotal.Add(1)
	s.upgrade(x, conn)
}

// upgrade writes the 101 response and starts the session's reader and writer.
func (s *Server) upgrade(x *session, conn net.Conn) {
	conn.SetWriteDeadline(time.Now().Add(time.Duration(s.cfg.WriteTimeout)))
	hdr := "Upgrade: " + apitypes.VersionToken(x.version) + "\r\n" + apitypes.VersionHeader + ": " + strconv.Itoa(x.version) + "\r\n"
	if x.lazySent {
		hdr += LazySentHeader + ": 1\r\n"
	}
	if x.directOK {
		hdr += apitypes.DirectHeader + ": 1\r\n"
	}
	if x.fdr != nil {
		hdr += apitypes.SendFDHeader + ": 1\r\n" // descriptors can be passed: SendFD is taken
		if s.cfg.MaxRecvRing > 0 {
			hdr += apitypes.RecvRingHeader + ": " + strconv.FormatInt(s.cfg.MaxRecvRing, 10) + "\r\n"
		}
	}
	conn.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n" + hdr + "\r\n"))
	conn.SetWriteDeadline(time.Time{})
	s.log.Debug("api session", "id", x.id, "cred", x.cred, "version", x.version)
	s.wg.Add(2)
	go x.writeLoop()
	go x.readLoop()
}

// userKey is the key of a client's user in Server.perUser: its uid, or -1 without peer
// credentials.
func userKey(c PeerCred, ok bool) int64 {
	if !ok {
		return -1
	}
	return int64(c.UID)
}

// admitLocked makes room for a new session of user: at max_clients_per_user one of the
// user's own sessions may be evicted, at max_clients anyone's (evictLocked). It returns
// why the client is refused, or "". s.mu is held.
func (s *Server) admitLocked(user int64) string {
	if len(s.sess) >= s.cfg.MaxClients && !s.evictLocked(user, false) {
		return fmt.Sprintf("api.max_clients (%d) sessions open, none evictable (unbound and idle for api.idle_timeout, %v)",
			s.cfg.MaxClients, s.cfg.IdleTimeout)
	}
	if s.perUser[user] >= s.cfg.PerUser() && !s.evictLocked(user, true) {
		s.refusedUser.Add(1)
		return fmt.Sprintf("api.max_clients_per_user (%d) sessions of this user (uid %d) open, none evictable "+
			"(unbound and idle for api.idle_timeout, %v)", s.cfg.PerUser(), user, s.cfg.IdleTimeout)
	}
	return ""
}

// evictLocked makes room for a new client: of the sessions (only user's when sameUser)
// that never bound an endpoint, the one idle longest (its client between requests,
// nothing outstanding, nothing queued) is closed if it has been idle for at least
// idle_timeout. A bound session is never evicted: a rank that waits to receive keeps its
// endpoint however long it waits, and a client's keep-alive frames cannot make it hold a
// slot that per-user limits do not bound already. It reports whether a session was
// evicted. s.mu is held.
func (s *Server) evictLocked(user int64, sameUser bool) bool {
	type cand struct {
		x    *session
		idle time.Duration
	}
	var cands []cand
	for _, x := range s.sess {
		if x.endpoint != 0 || (sameUser && x.user != user) {
			continue
		}
		if d := x.idleFor(); d >= time.Duration(s.cfg.IdleTimeout) && x.state.Load() == stateWaiting {
			cands = append(cands, cand{x, d})
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].idle > cands[j].idle })
	for _, c := range cands {
		x := c.x
		x.mu.Lock()
		ok := x.idleLocked() && x.state.CompareAndSwap(stateWaiting, stateEvicted)
		x.mu.Unlock()
		if !ok {
			continue // turned busy meanwhile, or holds messages
		}
		s.forgetLocked(x)
		s.evicted.Add(1)
		s.log.Info("api: closing an unbound session idle long to make room for a new client", "session", x.id,
			"idle", c.idle.Round(time.Millisecond), "max_clients", s.cfg.MaxClients)
		go x.evict(c.idle)
		return true
	}
	return false
}

// forgetLocked takes x out of the server's tables. s.mu is held.
func (s *Server) forgetLocked(x *session) {
	if _, ok := s.sess[x.id]; !ok {
		return
	}
	delete(s.sess, x.id)
	if s.perUser[x.user]--; s.perUser[x.user] <= 0 {
		delete(s.perUser, x.user)
	}
	if x.endpoint != 0 && s.eps[x.endpoint] == x {
		delete(s.eps, x.endpoint)
	}
	x.forgetPairsLocked()
}

// minChosenEP is the lowest endpoint the daemon picks for a Bind of endpoint 0.
const minChosenEP = 1 << 16

// bind binds ep (0: pick one) to x.
func (s *Server) bind(x *session, ep uint32) (uint32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if x.endpoint != 0 {
		return 0, fmt.Errorf("session already bound to endpoint %d", x.endpoint)
	}
	if ep == 0 {
		// Daemon-chosen endpoints are 65536..2^32-1 (wrapping within that range), so they
		// never collide with the fixed ones applications use below it.
		for s.eps[s.nextEP] != nil || s.nextEP < minChosenEP {
			if s.nextEP++; s.nextEP < minChosenEP {
				s.nextEP = minChosenEP
			}
		}
		ep = s.nextEP
		s.nextEP++
	}
	if s.eps[ep] != nil {
		return 0, fmt.Errorf("endpoint %d is bound by another session", ep)
	}
	s.eps[ep] = x
	x.endpoint = ep
	return ep, nil
}

func (s *Server) removeSession(x *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetLocked(x)
}
