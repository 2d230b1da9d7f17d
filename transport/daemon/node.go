// Package daemon drives the sans-IO protocol engine from a datagram socket: a reader
// goroutine feeds received batches, a timer goroutine runs the engine's timers, and
// applications send and receive messages through Node's methods. The engine clock is Unix
// nanoseconds, so kernel receive timestamps go into transport.RxMeta.RxTime unchanged.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartt-transport/smartt/transport"
)

// Packet is one datagram of a batch in a caller-owned buffer (the fields of udp.Packet).
type Packet struct {
	Buf     []byte         // storage; on read len(Buf) is the capacity offered; data is Buf[:N]
	N       int            // bytes of data
	Addr    netip.AddrPort // read: source; write: destination
	EV      uint16         // write: entropy value
	ECN     uint8          // read: ECN bits received; write: codepoint to send
	DSCP    uint8          // read: DSCP received
	Control bool           // write: control packet (ACK/NACK/...)
	RxTime  int64          // read: receive timestamp, Unix ns; 0 if none
	// RxKernel reports that RxTime came from the kernel (not the user-space clock).
	RxKernel bool
	TTL      uint8 // read: IP TTL / IPv6 hop limit; 0 unknown
}

// Socket is the datagram layer a Node runs over (transport/udp in the daemon, an
// in-memory network in tests).
type Socket interface {
	// ReadBatch blocks for at least one datagram; net.ErrClosed after Close.
	ReadBatch(pkts []Packet) (int, error)
	// WriteBatch sends pkts in order.
	WriteBatch(pkts []Packet) (int, error)
	// Close unblocks ReadBatch.
	Close() error
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
	// (transport.Config.DeliverChunks): give them back with transport.PutChunks.
	Chunks [][]byte
}

// Options configure a Node beyond the engine's config.
type Options struct {
	BatchSize int // datagrams per read and write batch (default 64)
	// GatherBatch groups each send batch by (destination, EV, control) before the write,
	// so the socket layer's GSO can join packets of a group (see Gather).
	GatherBatch bool
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
}

type pending struct {
	done    func(SendResult)
	start   int64
	retx    uint64
	conn    transport.ConnID
	msgSize int
	peer    netip.AddrPort
	msg     []byte
	resent  bool // already moved once to a new connection after ErrResetUnsent
}

type msgKey struct {
	conn transport.ConnID
	msg  uint32
}

// Node is one local address's transport: an engine, a socket and the goroutines between.
type Node struct {
	opts Options
	sock Socket
	log  *slog.Logger

	mu       sync.Mutex
	resends  uint64 // messages moved to a new connection after ErrResetUnsent (guarded by mu)
	ep       *transport.Endpoint
	dialed   map[netip.AddrPort]transport.ConnID
	pending  map[msgKey]*pending
	closing  bool
	stopped  bool
	wbuf     []Packet
	gather   bool
	deadline int64 // armed engine deadline, 0: none

	timer     *time.Timer
	kick      chan struct{}
	done      chan struct{}
	wg        sync.WaitGroup
	sendErrs  atomic.Uint64
	started   time.Time
	decisions DecisionStats
}

// Now is the engine clock: Unix nanoseconds, the clock of kernel timestamps.
func Now() int64 { return time.Now().UnixNano() }

// New builds a node over sock with engine config cfg. Start it with Start.
func New(cfg transport.Config, sock Socket, o Options) (*Node, error) {
	if o.BatchSize <= 0 {
		o.BatchSize = 64
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	var n *Node
	if o.TimeDecisions {
		if err := installTiming(&cfg, &n); err != nil {
			return nil, fmt.Errorf("transport config: %w", err)
		}
	}
	ep, err := transport.NewEndpoint(cfg, rand.New(rand.NewPCG(o.Seed, o.Seed^0x5eed)))
	if err != nil {
		return nil, err
	}
	n = &Node{
		opts: o, sock: sock, log: o.Logger, ep: ep,
		dialed:  make(map[netip.AddrPort]transport.ConnID),
		pending: make(map[msgKey]*pending),
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		started: time.Now(),
	}
	bufLen := datagramBuf(cfg)
	n.gather = o.GatherBatch
	n.wbuf = make([]Packet, o.BatchSize)
	for i := range n.wbuf {
		n.wbuf[i].Buf = make([]byte, bufLen)
	}
	n.decisions.Budget = o.DecisionBudget
	n.timer = time.NewTimer(time.Hour)
	n.timer.Stop()
	return n, nil
}

// datagramBuf is the size of the node's datagram buffers: the engine's largest datagram
// (transport.MaxDatagram: MTU + header, or an ACK, plus the seal with authentication on),
// with slack so that an oversized datagram is read whole and refused, not truncated.
func datagramBuf(cfg transport.Config) int { return max(cfg.MTU+128, transport.MaxDatagram(cfg)+64) }

// Start launches the reader and timer goroutines.
func (n *Node) Start() {
	n.wg.Add(2)
	go n.readLoop()
	go n.timerLoop()
}

// Started returns when the node was created.
func (n *Node) Started() time.Time { return n.started }

func (n *Node) readLoop() {
	defer n.wg.Done()
	bufLen := datagramBuf(n.ep.Config())
	pkts := make([]Packet, n.opts.BatchSize)
	store := make([]byte, bufLen*len(pkts))
	for i := range pkts {
		pkts[i].Buf = store[i*bufLen : (i+1)*bufLen : (i+1)*bufLen]
	}
	for {
		for i := range pkts {
			pkts[i].Buf = pkts[i].Buf[:cap(pkts[i].Buf)]
		}
		k, err := n.sock.ReadBatch(pkts)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || n.isStopped() {
				return
			}
			n.log.Warn("socket read", "err", err)
			time.Sleep(time.Millisecond) // do not spin on a persistent error
			continue
		}
		if !n.handleBatch(pkts[:k]) {
			return
		}
	}
}

// handleBatch feeds a received batch to the engine and flushes; false once stopped.
func (n *Node) handleBatch(pkts []Packet) bool {
	now := Now()
	stamped := 0
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return false
	}
	for i := range pkts {
		p := &pkts[i]
		if p.RxKernel {
			stamped++
		}
		n.ep.HandlePacket(now, p.Buf[:p.N], transport.RxMeta{From: p.Addr, RxTime: p.RxTime, ECN: p.ECN, DSCP: p.DSCP, TTL: p.TTL})
	}
	if n.opts.OnBatch != nil {
		n.opts.OnBatch(len(pkts), stamped)
	}
	n.flushLocked(now)
	return true
}

func (n *Node) timerLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.done:
			return
		case <-n.timer.C:
		case <-n.kick:
		}
		now := Now()
		n.mu.Lock()
		if n.stopped {
			n.mu.Unlock()
			return
		}
		n.deadline = 0
		n.ep.HandleTimeout(now)
		n.flushLocked(now)
		n.mu.Unlock()
	}
}

func (n *Node) isStopped() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stopped
}

// flushLocked sends every datagram the engine has, dispatches its events and re-arms the
// timer. n.mu must be held.
func (n *Node) flushLocked(now int64) {
	for {
		k := 0
		for k < len(n.wbuf) {
			p := &n.wbuf[k]
			t, ok := n.ep.PollTransmit(now, p.Buf[:cap(p.Buf)])
			if !ok {
				break
			}
			p.N, p.Addr, p.EV, p.ECN, p.Control = t.N, t.To, t.EV, t.ECN, t.Control
			k++
		}
		if k == 0 {
			break
		}
		if n.gather {
			Gather(n.wbuf[:k])
		}
		if _, err := n.sock.WriteBatch(n.wbuf[:k]); err != nil {
			if e := n.sendErrs.Add(1); e&(e-1) == 0 { // log at powers of two
				n.log.Warn("socket write", "err", err, "errors", e)
			}
		}
	}
	resent := n.resends
	for {
		ev, ok := n.ep.PollEvent()
		if !ok {
			break
		}
		n.dispatchLocked(now, ev)
	}
	if n.resends != resent {
		// A message moved to a new connection while dispatching: send it now rather than
		// at the next timer, which may be the idle deadline.
		n.flushLocked(now)
		return
	}
	n.armLocked()
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

func (n *Node) armLocked() {
	d, ok := n.ep.NextTimeout()
	if !ok {
		if n.deadline != 0 {
			n.timer.Stop()
			n.deadline = 0
		}
		return
	}
	if d == n.deadline {
		return
	}
	n.deadline = d
	n.timer.Reset(time.Duration(max(d-Now(), 0)))
}

func (n *Node) dispatchLocked(now int64, ev transport.Event) {
	switch ev.Kind {
	case transport.MessageReceived:
		if n.opts.OnReceive != nil {
			n.opts.OnReceive(Received{From: ev.Peer, Conn: ev.Conn, Data: ev.Data, Chunks: ev.Chunks})
		}
	case transport.MessageSent, transport.MessageFailed:
		k := msgKey{ev.Conn, ev.MsgID}
		p := n.pending[k]
		if p == nil {
			return
		}
		delete(n.pending, k)
		if ev.Kind == transport.MessageFailed && errors.Is(ev.Err, transport.ErrResetUnsent) && !p.resent && !n.closing {
			// The peer restarted and none of the message left: send it again on a new
			// connection instead of failing it (once, so a peer that keeps resetting
			// cannot keep it forever).
			if id, mid, err := n.sendLocked(now, p.peer, p.msg); err == nil {
				p.conn, p.resent = id, true
				n.pending[msgKey{id, mid}] = p
				n.resends++
				return
			}
		}
		st := n.ep.Stats()
		res := SendResult{Err: ev.Err, Elapsed: now - p.start,
			Retransmit: st.RetxSack + st.RetxNack + st.RetxTimeout - p.retx}
		if ev.Kind == transport.MessageFailed && res.Err == nil {
			res.Err = transport.ErrAborted
		}
		if c, ok := n.ep.ConnInfo(ev.Conn); ok {
			res.SRTT, res.Window = c.SRTT, c.Window
		}
		if n.opts.OnComplete != nil {
			n.opts.OnComplete(res, p.msgSize)
		}
		if p.done != nil {
			p.done(res)
		}
	case transport.ConnClosed:
		if id, ok := n.dialed[ev.Peer]; ok && id == ev.Conn {
			delete(n.dialed, ev.Peer)
		}
		if ev.Err != nil {
			n.log.Info("connection aborted", "peer", ev.Peer, "err", ev.Err)
		}
	case transport.ConnAccepted:
		n.log.Debug("connection accepted", "peer", ev.Peer)
	}
}

// Send queues msg for peer (dialling a connection on first use) and calls done with the
// outcome, with the node's lock held (done must not block or call back into the node).
// The engine keeps msg until then: do not modify it.
func (n *Node) Send(peer netip.AddrPort, msg []byte, done func(SendResult)) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return ErrStopped
	}
	if n.closing {
		return ErrShuttingDown
	}
	now := Now()
	id, mid, err := n.sendLocked(now, peer, msg)
	if err != nil {
		return err
	}
	st := n.ep.Stats()
	n.pending[msgKey{id, mid}] = &pending{done: done, start: now, conn: id, msgSize: len(msg),
		retx: st.RetxSack + st.RetxNack + st.RetxTimeout, peer: peer, msg: msg}
	n.flushLocked(now)
	return nil
}

// sendLocked queues msg on the connection to peer, dialling one if there is none or the
// one there is closing or gone.
func (n *Node) sendLocked(now int64, peer netip.AddrPort, msg []byte) (transport.ConnID, uint32, error) {
	id, ok := n.dialed[peer]
	if !ok {
		var err error
		if id, err = n.ep.Dial(now, peer); err != nil {
			return 0, 0, err
		}
		n.dialed[peer] = id
	}
	mid, err := n.ep.Send(now, id, msg)
	if errors.Is(err, transport.ErrClosed) || errors.Is(err, transport.ErrUnknownConn) {
		// The old connection is closing or gone: open a new one.
		delete(n.dialed, peer)
		if id, err = n.ep.Dial(now, peer); err != nil {
			return 0, 0, err
		}
		n.dialed[peer] = id
		mid, err = n.ep.Send(now, id, msg)
	}
	return id, mid, err
}

// Stats returns the engine's counters.
func (n *Node) Stats() transport.Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ep.Stats()
}

// Conns appends a snapshot of every live connection to dst.
func (n *Node) Conns(dst []transport.ConnInfo) []transport.ConnInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ep.Conns(dst)
}

// Config returns the engine's configuration.
func (n *Node) Config() transport.Config { return n.ep.Config() }

// Pending returns the number of messages sent and not yet completed.
func (n *Node) Pending() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.pending)
}

// SendErrors returns the number of failed socket writes.
func (n *Node) SendErrors() uint64 { return n.sendErrs.Load() }

// Shutdown stops accepting messages, waits until every outstanding message completes or
// ctx ends, then fails the rest (each sender hears of it), closes connections, and stops
// the goroutines and the socket.
func (n *Node) Shutdown(ctx context.Context) error {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return nil
	}
	n.closing = true
	n.mu.Unlock()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for n.Pending() > 0 && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	drained := n.Pending() == 0
	n.mu.Lock()
	now := Now()
	failed := len(n.pending)
	for _, c := range n.ep.Conns(nil) {
		if drained {
			_ = n.ep.Close(now, c.ID)
		} else {
			_ = n.ep.Abort(now, c.ID) // fails every outstanding message with ErrAborted
		}
	}
	n.flushLocked(now)
	for k, p := range n.pending { // messages the engine no longer knows (should be none)
		delete(n.pending, k)
		if p.done != nil {
			p.done(SendResult{Err: ErrShuttingDown, Elapsed: now - p.start})
		}
	}
	n.mu.Unlock()
	if drained {
		// Give clean CLOSEs a moment to be acknowledged (bounded by ctx).
		for i := 0; i < 100 && len(n.Conns(nil)) > 0 && ctx.Err() == nil; i++ {
			time.Sleep(time.Millisecond)
		}
	}
	n.mu.Lock()
	n.stopped = true
	n.timer.Stop()
	n.mu.Unlock()
	close(n.done)
	err := n.sock.Close()
	n.wg.Wait()
	if failed > 0 {
		n.log.Warn("shutdown deadline passed; failed outstanding messages", "messages", failed)
	}
	return err
}

// String describes the node for logs.
func (n *Node) String() string {
	return fmt.Sprintf("node(listen port %d)", n.ep.Config().ListenPort)
}
