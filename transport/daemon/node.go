// Package daemon drives the sans-IO protocol engine from a datagram socket: a reader
// goroutine feeds received batches, a timer goroutine runs the engine's timers, and
// applications send and receive messages through Node's methods. A Node may run several
// engine shards, each with its own socket and goroutines (NewShards). The engine clock is Unix
// nanoseconds, so kernel receive timestamps go into transport.RxMeta.RxTime unchanged.
package daemon

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/dgram"
	"github.com/smartt-transport/smartt/transport/wire"
)

// Packet is one datagram of a batch in a caller-owned buffer: the socket layer's own
// type (udp.Packet is the same), so a socket hands its batch through without a copy.
type Packet = dgram.Packet

// PayloadGatherer is a Socket whose WriteBatch sends Packet.Payload after Buf[:N] in the
// same datagram, without copying it (iovecs). A Node sends data packets' payloads from
// the messages' buffers through such a socket unless Options.CopyPayload is set.
type PayloadGatherer interface {
	GathersPayload() bool
}

// Socket is the datagram layer a Node runs over (transport/udp in the daemon, an
// in-memory network in tests).
type Socket interface {
	// ReadBatch blocks for at least one datagram; net.ErrClosed after Close. It may point
	// a Packet's Buf at its own memory instead of filling the caller's: valid until the
	// next ReadBatch (the caller gives its buffers again for every call).
	ReadBatch(pkts []Packet) (int, error)
	// WriteBatch sends pkts in order.
	WriteBatch(pkts []Packet) (int, error)
	// Close unblocks ReadBatch.
	Close() error
}

// TxBufferer is a Socket that lends send buffers of its own memory (the AF_XDP
// datapath's UMEM), so datagrams are built where they are sent from.
type TxBufferer interface {
	// TxBuffers points pkts[i].Buf at up to len(pkts) of its buffers and returns how
	// many; WriteBatch sends packets built in them without a copy. The next TxBuffers or
	// WriteBatch takes back the ones not sent.
	TxBuffers(pkts []Packet) int
}

// Errors of Node.
var (
	ErrShuttingDown = errors.New("daemon: shutting down, no new messages accepted")
	ErrStopped      = errors.New("daemon: node stopped")
)

// SendResult is the outcome of one message: delivered (Err nil) or failed.
type SendResult struct {
	Err        error
	Elapsed    int64 // ns from Send to the last acknowledgement (or failure)
	SRTT       int64 // smoothed RTT of the connection at completion, ns
	Window     int   // congestion window at completion, bytes
	Retransmit uint64
	// Retransmit counts the endpoint's retransmissions while the message was outstanding
	// (exactly the message's own when it was alone in flight).
}

// Received is a whole message from a peer. Data belongs to the receiver.
type Received struct {
	From netip.AddrPort
	Conn transport.ConnID
	Data []byte
	// Chunks holds the message instead of Data when the engine delivers chunks
	// (transport.Hooks.DeliverChunks): give them back with transport.PutChunks.
	Chunks [][]byte
	// Placed is non-zero when the message is in the buffer transport.Hooks.Placer gave
	// for it (Data; the placement's token).
	Placed uint64
}

// Options configure a Node beyond the engine's config.
type Options struct {
	// Hooks are passed to every shard's engine (transport.Hooks); the node sets their
	// IDShards and IDShard when it runs more than one shard.
	Hooks     transport.Hooks
	BatchSize int // datagrams per read and write batch (default 64)
	// GatherBatch groups each send batch by (destination, EV, control) before the write,
	// so the socket layer's GSO can join packets of a group (see Gather).
	GatherBatch bool
	// CopyPayload makes the engine copy each data packet's payload into the packet's
	// buffer behind its header, as formerly, even on a socket that sends the
	// payload from the message's buffer (PayloadGatherer): for comparisons.
	CopyPayload bool
	Logger      *slog.Logger // default slog.Default()
	Seed        uint64       // random seed (0: from the clock)
	// OnReceive is called with every received message, with the node's lock held: it must
	// not block or call back into the node.
	OnReceive func(Received)
	// OnBatch, if set, is called after each received batch with its size and the number of
	// its packets that carried a kernel timestamp (for metrics; lock held).
	OnBatch func(n, kernelStamped int)
	// OnComplete, if set, is called once per sent message with its outcome and size (for
	// metrics; lock held).
	OnComplete func(r SendResult, size int)
	// TimeDecisions measures every congestion-control decision (two monotonic clock reads
	// per ACK) into Node.Decisions; DecisionBudget (ns) counts the ones that took longer.
	TimeDecisions  bool
	DecisionBudget int64
	// Steer names the shard (0..n-1 of n) that owns a received datagram (default
	// wire.Shard, what the socket layer's steering program picks). With several shards
	// (NewShards), a datagram a shard's socket receives for another shard is handed to
	// that shard's queue, not fed to the wrong engine.
	Steer func(b []byte, n int) int
	// ShardQueue bounds each shard's queue of datagrams handed over by other shards for
	// its live connections (default 4,096); beyond it they are dropped and counted
	// (ShardStats.HandoffDrops), as a full socket buffer would drop them. Datagrams that
	// name no live connection of the shard (first contacts, forgeries) go through a
	// queue of their own, a quarter of the size, served after the first
	// (ShardStats.HandoffDropsUnknown): a flood naming one shard cannot crowd out its
	// connections' datagrams.
	ShardQueue int
	// Lane, if set, names the lane of an outgoing message: messages to one peer go on one
	// connection per lane (each in order), so that a receiver that refuses one lane's
	// messages for a while (transport.RecvGate) stalls no other lane. The daemon's lane
	// is the message's destination endpoint. Nil: one connection per peer.
	Lane func(msg []byte) uint32
}

// laneKey names the connection a message goes on: its peer and its lane (Options.Lane).
type laneKey struct {
	peer netip.AddrPort
	lane uint32
}

type pending struct {
	done    func(SendResult)
	start   int64
	retx    uint64
	conn    transport.ConnID
	msgSize int
	peer    netip.AddrPort
	msg     []byte
	resent  bool   // already moved once to a new connection after ErrResetUnsent
	key     msgKey // its key in shard.pending (Unsend may renumber it)
	gen     uint64 // shard.gen when queued: tells a MsgHandle's record from its reuse
}

// maxFreePending bounds the pending records a shard keeps for reuse.
const maxFreePending = 1024

type msgKey struct {
	conn transport.ConnID
	msg  uint32
}

// Node is one local address's transport: one or more engine shards, each an engine, a
// socket and the goroutines between. Messages to a peer always go through the shard its
// address hashes to, so they stay on one connection, in order.
type Node struct {
	opts    Options
	log     *slog.Logger
	shards  []*shard
	done    chan struct{}
	wg      sync.WaitGroup
	started time.Time

	unreachDropped atomic.Uint64 // ICMP reports over the rate bound (unreachable.go)
}

// shard is one engine with its socket, lock and goroutines.
type shard struct {
	n    *Node
	idx  int
	sock Socket

	mu       sync.Mutex
	resends  uint64 // messages moved to a new connection after ErrResetUnsent (guarded by mu)
	ep       *transport.Endpoint
	dialed   map[laneKey]transport.ConnID
	laneOf   map[transport.ConnID]laneKey // dialed, reversed
	pending  map[msgKey]*pending
	free     []*pending // completed, for the next messages (at most maxFreePending)
	gen      uint64     // pending records handed out (guarded by mu)
	closing  bool
	stopped  bool
	wbuf     []Packet
	wstore   [][]byte // wbuf's own buffers (a TxBufferer lends others)
	gather   bool
	deadline int64 // armed engine deadline, 0: none

	timer     *time.Timer
	kick      chan struct{}
	sendErrs  atomic.Uint64
	held      atomic.Bool // SendHeld queued messages that FlushHeld has not written yet
	decisions DecisionStats

	inbox        chan *handoff // datagrams other shards received for this one's connections
	inboxUnknown chan *handoff // the rest other shards received for this one: served after inbox
	handedOut    atomic.Uint64 // datagrams this shard's socket received for another shard
	adopted      atomic.Uint64 // datagrams other shards handed to this one
	handoffDrops atomic.Uint64 // datagrams for this shard's connections dropped: inbox was full
	dropsUnknown atomic.Uint64 // other datagrams for this shard dropped: inboxUnknown was full
	knownMu      sync.RWMutex
	known        map[uint64]struct{} // this shard's live connection IDs (other shards read it)
}

// handoff is a datagram on its way to the shard that owns it.
type handoff struct {
	buf []byte
	pkt Packet
}

// Now is the engine clock: Unix nanoseconds, the clock of kernel timestamps.
func Now() int64 { return time.Now().UnixNano() }

// New builds a node over sock with engine config cfg (one shard). Start it with Start.
func New(cfg transport.Config, sock Socket, o Options) (*Node, error) {
	return NewShards(cfg, []Socket{sock}, o)
}

// NewShards builds a node of len(socks) engine shards, shard i on socks[i] (at most 256).
// Each shard's engine chooses connection IDs that name it (transport.Hooks.IDShards), so
// the socket layer can steer datagrams to the socket of the shard that owns them
// (Options.Steer says which that is); one shard is exactly New. Start it with Start.
func NewShards(cfg transport.Config, socks []Socket, o Options) (*Node, error) {
	if len(socks) < 1 || len(socks) > 256 {
		return nil, fmt.Errorf("daemon: %d shards: allowed range is 1..256", len(socks))
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 64
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	if o.Steer == nil {
		o.Steer = wire.Shard
	}
	if o.ShardQueue <= 0 {
		o.ShardQueue = 4096
	}
	n := &Node{opts: o, log: o.Logger, done: make(chan struct{}), started: time.Now()}
	for i, sock := range socks {
		c, h := cfg, o.Hooks
		if len(socks) > 1 {
			h.IDShards, h.IDShard = len(socks), i
			// A held completion ACK rides only on data its own engine sends, and a
			// request's connection (accepted: the shard its first packet steered to)
			// and the answer's (dialled: the shard of the peer's address) are mostly
			// in different shards: unanswered holds would only delay the senders.
			c.Ack.CompleteDelay = 0
		}
		s := &shard{n: n, idx: i, sock: sock}
		if o.TimeDecisions {
			if err := installTiming(&c, &h, s); err != nil {
				return nil, fmt.Errorf("transport config: %w", err)
			}
		}
		// Shard 0 draws from the node's seed as a single engine always has; the others
		// from seeds derived from it.
		seed := o.Seed + uint64(i)*0x9e3779b97f4a7c15
		ep, err := transport.NewEndpoint(c, rand.New(rand.NewPCG(seed, seed^0x5eed)), h)
		if err != nil {
			return nil, err
		}
		s.ep = ep
		if g, ok := socks[i].(PayloadGatherer); ok && g.GathersPayload() && !o.CopyPayload {
			ep.SetPayloadAlias(true) // flushLocked sends before the next engine call
		}
		s.dialed = make(map[laneKey]transport.ConnID)
		s.laneOf = make(map[transport.ConnID]laneKey)
		s.pending = make(map[msgKey]*pending)
		s.kick = make(chan struct{}, 1)
		bufLen := datagramBuf(c)
		s.gather = o.GatherBatch
		s.wbuf = make([]Packet, o.BatchSize)
		s.wstore = make([][]byte, o.BatchSize)
		for i := range s.wbuf {
			s.wstore[i] = make([]byte, bufLen)
			s.wbuf[i].Buf = s.wstore[i]
		}
		s.decisions.Budget = o.DecisionBudget
		s.timer = time.NewTimer(time.Hour)
		s.timer.Stop()
		if len(socks) > 1 {
			s.inbox = make(chan *handoff, o.ShardQueue)
			s.inboxUnknown = make(chan *handoff, max(o.ShardQueue/4, 1))
			s.known = make(map[uint64]struct{})
		}
		n.shards = append(n.shards, s)
	}
	return n, nil
}

// datagramBuf is the size of the node's datagram buffers: the engine's largest datagram
// (transport.MaxDatagram: MTU + header, or an ACK, plus the seal with authentication on),
// with slack so that an oversized datagram is read whole and refused, not truncated.
func datagramBuf(cfg transport.Config) int { return max(cfg.MTU+128, transport.MaxDatagram(cfg)+64) }

// Start launches every shard's reader and timer goroutines.
func (n *Node) Start() {
	for _, s := range n.shards {
		n.wg.Add(2)
		go s.readLoop()
		go s.timerLoop()
		if src, ok := s.sock.(UnreachableSource); ok {
			n.wg.Add(1)
			go s.unreachableLoop(src)
		}
	}
}

// Started returns when the node was created.
func (n *Node) Started() time.Time { return n.started }

// NumShards returns the number of engine shards.
func (n *Node) NumShards() int { return len(n.shards) }

func (s *shard) readLoop() {
	defer s.n.wg.Done()
	bufLen := datagramBuf(s.ep.Config())
	pkts := make([]Packet, s.n.opts.BatchSize)
	store := make([]byte, bufLen*len(pkts))
	for {
		for i := range pkts {
			// Anew each time: a socket may have pointed Buf at its own memory (udp's GRO
			// buffers with udp.Config.GROInPlace, the AF_XDP UMEM), valid until this ReadBatch.
			pkts[i].Buf = store[i*bufLen : (i+1)*bufLen : (i+1)*bufLen]
		}
		k, err := s.sock.ReadBatch(pkts)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.isStopped() {
				return
			}
			s.n.log.Warn("socket read", "shard", s.idx, "err", err)
			time.Sleep(time.Millisecond) // do not spin on a persistent error
			continue
		}
		if !s.handleBatch(pkts[:k]) {
			return
		}
	}
}

// handleBatch feeds a received batch to the engine and flushes; false once stopped.
// Datagrams another shard owns are handed to it instead.
func (s *shard) handleBatch(pkts []Packet) bool {
	now := Now()
	stamped := 0
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	nsh := len(s.n.shards)
	for i := range pkts {
		p := &pkts[i]
		if p.RxKernel {
			stamped++
		}
		if nsh > 1 {
			if lead, rest := wire.BundleSplit(p.Buf[:p.N]); rest != nil && wire.BundledData(rest) {
				// An ACK with a DATA packet bundled behind it (a held ACK riding in
				// its answer's datagram): the two may belong to different shards.
				if o := s.n.opts.Steer(rest, nsh); o != s.n.opts.Steer(lead, nsh) {
					q := *p
					q.Buf, q.N = rest, len(rest)
					s.feed(now, &q, nsh)
					p.N = len(lead)
				}
			}
		}
		s.feed(now, p, nsh)
	}
	if s.n.opts.OnBatch != nil {
		s.n.opts.OnBatch(len(pkts), stamped)
	}
	s.flushLocked(now)
	return true
}

// feed gives datagram p to the engine, or with several shards to the shard that owns it.
func (s *shard) feed(now int64, p *Packet, nsh int) {
	if nsh > 1 {
		if o := s.n.opts.Steer(p.Buf[:p.N], nsh); o != s.idx && o >= 0 && o < nsh {
			s.handOff(s.n.shards[o], p)
			return
		}
	}
	s.ep.HandlePacket(now, p.Buf[:p.N], transport.RxMeta{From: p.Addr, RxTime: p.RxTime, ECN: p.ECN, DSCP: p.DSCP, TTL: p.TTL})
}

var handoffPool sync.Pool

// handOff copies p into the owner shard's queue (or drops it, counted, when that is full).
func (s *shard) handOff(owner *shard, p *Packet) {
	h, _ := handoffPool.Get().(*handoff)
	if h == nil {
		h = new(handoff)
	}
	if cap(h.buf) < p.N {
		h.buf = make([]byte, max(p.N, datagramBuf(s.ep.Config())))
	}
	h.pkt = *p
	h.pkt.Buf = h.buf[:p.N]
	copy(h.pkt.Buf, p.Buf[:p.N])
	s.handedOut.Add(1)
	q, drops := owner.inbox, &owner.handoffDrops
	if !owner.owns(h.pkt.Buf) {
		q, drops = owner.inboxUnknown, &owner.dropsUnknown
	}
	select {
	case q <- h:
	default:
		drops.Add(1)
		handoffPool.Put(h)
	}
}

// owns reports whether datagram b names a live connection of s: its DstConn (a returned
// header's SrcConn, our own ID) is one of s's.
func (s *shard) owns(b []byte) bool {
	if len(b) < wire.CommonLen {
		return false
	}
	id := binary.BigEndian.Uint64(b[8:])
	if wire.Returned(b) {
		id = binary.BigEndian.Uint64(b[16:])
	}
	if id == 0 {
		return false
	}
	s.knownMu.RLock()
	_, ok := s.known[id]
	s.knownMu.RUnlock()
	return ok
}

// setKnown records (or forgets) a live connection of s for owns.
func (s *shard) setKnown(id transport.ConnID, live bool) {
	if s.known == nil {
		return // one shard: nothing is handed over
	}
	s.knownMu.Lock()
	if live {
		s.known[uint64(id)] = struct{}{}
	} else {
		delete(s.known, uint64(id))
	}
	s.knownMu.Unlock()
}

// adopt feeds datagrams handed over by other shards (h first, then what else is queued,
// up to a batch) to the engine and flushes.
func (s *shard) adopt(h *handoff) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		handoffPool.Put(h)
		return
	}
	now := Now()
	for k := 0; ; k++ {
		p := &h.pkt
		s.ep.HandlePacket(now, p.Buf[:p.N], transport.RxMeta{From: p.Addr, RxTime: p.RxTime, ECN: p.ECN, DSCP: p.DSCP, TTL: p.TTL})
		s.adopted.Add(1)
		h.pkt = Packet{}
		handoffPool.Put(h)
		if k+1 == len(s.wbuf) {
			break
		}
		select {
		case h = <-s.inbox:
			continue
		default:
		}
		select {
		case h = <-s.inboxUnknown:
			continue
		default:
		}
		break
	}
	s.flushLocked(now)
}

func (s *shard) timerLoop() {
	defer s.n.wg.Done()
	for {
		select {
		case <-s.n.done:
			return
		case h := <-s.inbox: // nil channel with one shard: never ready
			s.adopt(h)
			continue
		case h := <-s.inboxUnknown:
			s.adopt(h)
			continue
		case <-s.timer.C:
		case <-s.kick:
		}
		now := Now()
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			return
		}
		s.deadline = 0
		s.ep.HandleTimeout(now)
		s.flushLocked(now)
		s.mu.Unlock()
	}
}

func (s *shard) isStopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// flushLocked sends every datagram the engine has, dispatches its events and re-arms the
// timer. s.mu must be held.
func (s *shard) flushLocked(now int64) {
	tb, _ := s.sock.(TxBufferer)
	for {
		// The engine writes each datagram where it is sent from when the socket lends
		// buffers; into our own otherwise.
		m := 0
		if tb != nil {
			m = tb.TxBuffers(s.wbuf)
		}
		for i := m; i < len(s.wbuf); i++ {
			s.wbuf[i].Buf = s.wstore[i]
		}
		k := 0
		for k < len(s.wbuf) {
			p := &s.wbuf[k]
			t, ok := s.ep.PollTransmit(now, p.Buf[:cap(p.Buf)])
			if !ok {
				break
			}
			p.N, p.Addr, p.EV, p.ECN, p.Control, p.Payload = t.N, t.To, t.EV, t.ECN, t.Control, t.Payload
			k++
		}
		if k == 0 {
			break
		}
		if s.gather {
			Gather(s.wbuf[:k])
		}
		if _, err := s.sock.WriteBatch(s.wbuf[:k]); err != nil {
			if e := s.sendErrs.Add(1); e&(e-1) == 0 { // log at powers of two
				s.n.log.Warn("socket write", "shard", s.idx, "err", err, "errors", e)
			}
		}
		for i := range s.wbuf[:k] {
			s.wbuf[i].Payload = nil // the messages' buffers may go back to their owners now
		}
	}
	resent := s.resends
	for {
		ev, ok := s.ep.PollEvent()
		if !ok {
			break
		}
		s.dispatchLocked(now, ev)
	}
	if s.resends != resent {
		// A message moved to a new connection while dispatching: send it now rather than
		// at the next timer, which may be the idle deadline.
		s.flushLocked(now)
		return
	}
	s.armLocked()
}

// Gather reorders pkts in place so that packets with the same destination, EV and kind
// (data or control) are adjacent: each group keeps its packets' order and the groups
// follow the order of their first packets. Packets of one connection on different EVs may
// change order (the receiver takes any order; the shift is bounded by the batch). It
// allocates nothing; O(len(pkts)^2) in the worst case, for batches of up to 1,024.
func Gather(pkts []Packet) {
	for i := 0; i < len(pkts); {
		j := i + 1
		for m := i + 1; m < len(pkts); m++ {
			if pkts[m].EV == pkts[i].EV && pkts[m].Addr == pkts[i].Addr && pkts[m].Control == pkts[i].Control {
				if m != j {
					p := pkts[m]
					copy(pkts[j+1:m+1], pkts[j:m])
					pkts[j] = p
				}
				j++
			}
		}
		i = j
	}
}

func (s *shard) armLocked() {
	d, ok := s.ep.NextTimeout()
	if !ok {
		if s.deadline != 0 {
			s.timer.Stop()
			s.deadline = 0
		}
		return
	}
	if d == s.deadline {
		return
	}
	s.deadline = d
	s.timer.Reset(time.Duration(max(d-Now(), 0)))
}

func (s *shard) dispatchLocked(now int64, ev transport.Event) {
	o := &s.n.opts
	switch ev.Kind {
	case transport.MessageReceived:
		if o.OnReceive != nil {
			o.OnReceive(Received{From: ev.Peer, Conn: ev.Conn, Data: ev.Data, Chunks: ev.Chunks, Placed: ev.Placed})
		}
	case transport.MessageSent, transport.MessageFailed:
		k := msgKey{ev.Conn, ev.MsgID}
		p := s.pending[k]
		if p == nil {
			return
		}
		delete(s.pending, k)
		if ev.Kind == transport.MessageFailed && errors.Is(ev.Err, transport.ErrResetUnsent) && !p.resent && !s.closing {
			// The peer restarted and none of the message left: send it again on a new
			// connection instead of failing it (once, so a peer that keeps resetting
			// cannot keep it forever).
			if id, mid, err := s.sendLocked(now, p.peer, p.msg); err == nil {
				p.conn, p.resent, p.key = id, true, msgKey{id, mid}
				s.pending[p.key] = p
				s.resends++
				return
			}
		}
		st := s.ep.Stats()
		res := SendResult{Err: ev.Err, Elapsed: now - p.start,
			Retransmit: st.RetxSack + st.RetxNack + st.RetxTimeout - p.retx}
		if ev.Kind == transport.MessageFailed && res.Err == nil {
			res.Err = transport.ErrAborted
		}
		if c, ok := s.ep.ConnInfo(ev.Conn); ok {
			res.SRTT, res.Window = c.SRTT, c.Window
		}
		if o.OnComplete != nil {
			o.OnComplete(res, p.msgSize)
		}
		if p.done != nil {
			p.done(res)
		}
		if len(s.free) < maxFreePending {
			*p = pending{}
			s.free = append(s.free, p)
		}
	case transport.ConnClosed:
		s.setKnown(ev.Conn, false)
		if k, ok := s.laneOf[ev.Conn]; ok {
			delete(s.laneOf, ev.Conn)
			if s.dialed[k] == ev.Conn {
				delete(s.dialed, k)
			}
		}
		if ev.Err != nil {
			s.n.log.Info("connection aborted", "peer", ev.Peer, "shard", s.idx, "err", ev.Err)
		}
	case transport.ConnAccepted:
		s.setKnown(ev.Conn, true)
		s.n.log.Debug("connection accepted", "peer", ev.Peer, "shard", s.idx)
	}
}

// shardFor returns the shard that sends to peer: a hash of its address and port, so that
// one peer's messages stay on one connection, in order.
func (n *Node) shardFor(peer netip.AddrPort) *shard {
	if len(n.shards) == 1 {
		return n.shards[0]
	}
	return n.shards[ShardOfPeer(peer, len(n.shards))]
}

// ShardOfPeer returns the shard (0..n-1) that sends to peer: FNV-1a over the address (16
// bytes) and port, mixed (murmur3's finaliser: FNV's low bits alone follow the parity of
// the input's) and scaled to n.
func ShardOfPeer(peer netip.AddrPort, n int) int {
	h := uint64(14695981039346656037)
	a := peer.Addr().As16()
	for _, b := range a {
		h = (h ^ uint64(b)) * 1099511628211
	}
	h = (h ^ uint64(peer.Port()>>8)) * 1099511628211
	h = (h ^ uint64(peer.Port()&0xff)) * 1099511628211
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	hi, _ := bits.Mul64(h, uint64(n))
	return int(hi)
}

// Send queues msg for peer (dialling a connection on first use) and calls done with the
// outcome, with the lock of the peer's shard held (done must not block or call back into
// the node). The engine keeps msg until then: do not modify it.
func (n *Node) Send(peer netip.AddrPort, msg []byte, done func(SendResult)) error {
	_, err := n.send(peer, msg, done, true)
	return err
}

// SendHeld is Send without a socket write of its own: the message's first packets go out
// at the next FlushHeld (or any earlier flush of its shard: an ACK, a timer). A caller
// with a burst of messages (a session reading a batch of Send frames) thus pays one
// batched socket write for the burst instead of one per message. FlushHeld must follow.
func (n *Node) SendHeld(peer netip.AddrPort, msg []byte, done func(SendResult)) error {
	_, err := n.send(peer, msg, done, false)
	return err
}

// FlushHeld writes what SendHeld queued, in every shard that has some.
func (n *Node) FlushHeld() {
	for _, s := range n.shards {
		if s.held.Swap(false) {
			s.mu.Lock()
			if !s.stopped {
				s.flushLocked(Now())
			}
			s.mu.Unlock()
		}
	}
}

func (n *Node) send(peer netip.AddrPort, msg []byte, done func(SendResult), flush bool) (MsgHandle, error) {
	s := n.shardFor(peer)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return MsgHandle{}, ErrStopped
	}
	if s.closing {
		return MsgHandle{}, ErrShuttingDown
	}
	now := Now()
	id, mid, err := s.sendLocked(now, peer, msg)
	if err != nil {
		return MsgHandle{}, err
	}
	st := s.ep.Stats()
	var p *pending
	if k := len(s.free); k > 0 { // recycled: no allocation per message
		p, s.free = s.free[k-1], s.free[:k-1]
	} else {
		p = new(pending)
	}
	s.gen++
	*p = pending{done: done, start: now, conn: id, msgSize: len(msg),
		retx: st.RetxSack + st.RetxNack + st.RetxTimeout, peer: peer, msg: msg,
		key: msgKey{id, mid}, gen: s.gen}
	s.pending[p.key] = p
	if flush {
		s.flushLocked(now)
	} else {
		s.held.Store(true)
	}
	return MsgHandle{peer: peer, p: p, gen: p.gen}, nil
}

// sendLocked queues msg on the connection to peer, dialling one if there is none or the
// one there is closing or gone.
func (s *shard) sendLocked(now int64, peer netip.AddrPort, msg []byte) (transport.ConnID, uint32, error) {
	k := laneKey{peer: peer}
	if s.n.opts.Lane != nil {
		k.lane = s.n.opts.Lane(msg)
	}
	id, ok := s.dialed[k]
	if !ok {
		var err error
		if id, err = s.dial(now, k); err != nil {
			return 0, 0, err
		}
	}
	mid, err := s.ep.Send(now, id, msg)
	if errors.Is(err, transport.ErrClosed) || errors.Is(err, transport.ErrUnknownConn) {
		// The old connection is closing or gone: open a new one.
		if id, err = s.dial(now, k); err != nil {
			return 0, 0, err
		}
		mid, err = s.ep.Send(now, id, msg)
	}
	return id, mid, err
}

// dial opens the connection of lane k, replacing any it had.
func (s *shard) dial(now int64, k laneKey) (transport.ConnID, error) {
	if old, ok := s.dialed[k]; ok {
		delete(s.laneOf, old)
		delete(s.dialed, k)
	}
	id, err := s.ep.Dial(now, k.peer)
	if err != nil {
		return 0, err
	}
	s.dialed[k], s.laneOf[id] = id, k
	s.setKnown(id, true)
	return id, nil
}

// Stats returns the engine's counters, summed over the shards (RecvBufferedMax is the sum
// of the shards' high-water marks).
func (n *Node) Stats() transport.Stats {
	var sum transport.Stats
	for _, s := range n.shards {
		s.mu.Lock()
		st := s.ep.Stats()
		s.mu.Unlock()
		AddStats(&sum, &st)
	}
	return sum
}

// ShardStats is one engine shard's share of a node's work.
type ShardStats struct {
	Engine transport.Stats
	Conns  int // live connections
	// HandedOut counts datagrams this shard's socket received for another shard and
	// handed to it; Adopted those other shards handed to this one; HandoffDrops those
	// for this shard's connections dropped because its queue (Options.ShardQueue) was
	// full; HandoffDropsUnknown those naming none of its connections dropped because
	// their queue was.
	HandedOut, Adopted, HandoffDrops, HandoffDropsUnknown uint64
}

// Shards returns every shard's counters, in shard order.
func (n *Node) Shards() []ShardStats {
	out := make([]ShardStats, len(n.shards))
	for i, s := range n.shards {
		s.mu.Lock()
		out[i] = ShardStats{Engine: s.ep.Stats(), Conns: s.ep.NumConns()}
		s.mu.Unlock()
		out[i].HandedOut, out[i].Adopted, out[i].HandoffDrops = s.handedOut.Load(), s.adopted.Load(), s.handoffDrops.Load()
		out[i].HandoffDropsUnknown = s.dropsUnknown.Load()
	}
	return out
}

// Conns appends a snapshot of every live connection of every shard to dst.
func (n *Node) Conns(dst []transport.ConnInfo) []transport.ConnInfo {
	for _, s := range n.shards {
		s.mu.Lock()
		dst = s.ep.Conns(dst)
		s.mu.Unlock()
	}
	return dst
}

// Config returns the engine's configuration (shard 0's: the shards differ only in
// IDShard).
func (n *Node) Config() transport.Config { return n.shards[0].ep.Config() }

// Pending returns the number of messages sent and not yet completed.
func (n *Node) Pending() int {
	k := 0
	for _, s := range n.shards {
		s.mu.Lock()
		k += len(s.pending)
		s.mu.Unlock()
	}
	return k
}

// SendErrors returns the number of failed socket writes.
func (n *Node) SendErrors() uint64 {
	var k uint64
	for _, s := range n.shards {
		k += s.sendErrs.Load()
	}
	return k
}

// Shutdown stops accepting messages, waits until every outstanding message completes or
// ctx ends, then fails the rest (each sender hears of it), closes connections, and stops
// the goroutines and the sockets.
func (n *Node) Shutdown(ctx context.Context) error {
	first := n.shards[0]
	first.mu.Lock()
	stopped := first.stopped
	first.mu.Unlock()
	if stopped {
		return nil
	}
	for _, s := range n.shards {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for n.Pending() > 0 && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	drained := n.Pending() == 0
	failed := 0
	for _, s := range n.shards {
		failed += s.closeAll(drained)
	}
	if drained {
		// Give clean CLOSEs a moment to be acknowledged (bounded by ctx).
		for i := 0; i < 100 && len(n.Conns(nil)) > 0 && ctx.Err() == nil; i++ {
			time.Sleep(time.Millisecond)
		}
	}
	for _, s := range n.shards {
		s.mu.Lock()
		s.stopped = true
		s.timer.Stop()
		s.mu.Unlock()
	}
	close(n.done)
	var err error
	for _, s := range n.shards {
		if e := s.sock.Close(); e != nil && err == nil {
			err = e
		}
	}
	n.wg.Wait()
	for _, s := range n.shards { // datagrams handed over too late
		for s.inbox != nil && len(s.inbox) > 0 {
			handoffPool.Put(<-s.inbox)
		}
		for s.inboxUnknown != nil && len(s.inboxUnknown) > 0 {
			handoffPool.Put(<-s.inboxUnknown)
		}
	}
	if failed > 0 {
		n.log.Warn("shutdown deadline passed; failed outstanding messages", "messages", failed)
	}
	return err
}

// closeAll closes (drained) or aborts every connection of the shard and fails what the
// engine no longer knows; it returns the number of messages still outstanding.
func (s *shard) closeAll(drained bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := Now()
	failed := len(s.pending)
	for _, c := range s.ep.Conns(nil) {
		if drained {
			_ = s.ep.Close(now, c.ID)
		} else {
			_ = s.ep.Abort(now, c.ID) // fails every outstanding message with ErrAborted
		}
	}
	s.flushLocked(now)
	for k, p := range s.pending { // messages the engine no longer knows (should be none)
		delete(s.pending, k)
		if p.done != nil {
			p.done(SendResult{Err: ErrShuttingDown, Elapsed: now - p.start})
		}
	}
	return failed
}

// String describes the node for logs.
func (n *Node) String() string {
	if len(n.shards) > 1 {
		return fmt.Sprintf("node(listen port %d, %d shards)", n.Config().ListenPort, len(n.shards))
	}
	return fmt.Sprintf("node(listen port %d)", n.Config().ListenPort)
}

// Displace moves the message received into a Placer's buffer under token tok back into
// its engine's own buffers (transport.Endpoint.Displace), in whichever shard receives it;
// false when none holds it any more.
func (n *Node) Displace(tok uint64) bool {
	for _, s := range n.shards {
		s.mu.Lock()
		ok := !s.stopped && s.ep.Displace(tok)
		s.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}
