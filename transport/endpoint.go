// Package transport is smartt's sans-IO protocol engine: connections, messages cut into
// packets with sequence numbers, out-of-order placement, SACK/NACK/timeout loss recovery,
// flow control and the per-ACK hooks for congestion control and load balancing.
//
// The engine does no I/O, starts no goroutines and never reads the clock. The driver (the
// daemon's UDP loop, the simulator, a test network) feeds it datagrams with HandlePacket
// and timer expiries with HandleTimeout, passes the current time to every call, and asks
// PollTransmit for datagrams to send, PollEvent for what the application must learn, and
// NextTimeout for when to call again. An Endpoint is not safe for concurrent use.
package transport

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"unsafe"

	"github.com/smartt-transport/smartt/reps"
	"github.com/smartt-transport/smartt/transport/wire"
)

// peerKey identifies a peer's connection before we have handed it our ID.
type peerKey struct {
	addr netip.AddrPort
	id   uint64
}

// ctrlPkt is a connection-less control packet waiting to leave (RESET, CLOSE_ACK from TIME_WAIT).
type ctrlPkt struct {
	to       netip.AddrPort
	typ      wire.Type
	dst, src uint64
	reason   uint32 // CLOSE
}

type twEntry struct {
	expiry   int64
	local    uint64
	peer     peerKey
	unproven bool // its connection was removed unproven (counted in twUnproven)
}

// TimeWaitCharge is what one TIME_WAIT entry costs at most, bytes: its queue record
// (twEntry, 64 B, in a ring up to twice the size it needs) and its slots in twLocal and
// twPeer (8 and 40 B keys, maps up to twice their load). Measured: 175 to 258 B by where
// the tables are in their growth (TestTimeWaitChargeMatchesHeap).
const TimeWaitCharge = 256

const maxCtrlQueue = 256

// Endpoint is one local address's protocol engine: it owns every connection to and from it.
type Endpoint struct {
	cfg    Config
	hooks  Hooks // the driver's, with NewCC, NewBalancer and Buffers resolved
	rng    *rand.Rand
	conns  map[uint64]*conn
	list   []*conn // every live connection
	theap  []*conn // live connections, a min-heap by next deadline (timerheap.go)
	hstack []int32 // scratch for expired
	due    []*conn // scratch for HandleTimeout
	rate   int64   // the pacing rate windowOpen let a packet go at (sendData charges the pacer at it)
	byPeer map[peerKey]*conn
	ready  ring[*conn]
	events ring[Event]
	ctrl   ring[ctrlPkt]
	// lastConn is the connection lookup found last: a run of packets and sends of one
	// connection then finds it without hashing its ID.
	lastConn *conn

	twLocal map[uint64]struct{}  // local IDs of recently closed connections
	twPeer  map[peerKey]struct{} // peers' IDs of recently closed connections
	twQueue ring[twEntry]
	// twUnproven counts the entries of connections removed unproven (twRoom).
	twUnproven int

	// unproven lists accepted connections whose peer has not proven its address, oldest
	// first: under MaxConns pressure they are evicted in that order.
	unproven connList
	// exempt is the one message that may allocate beyond RecvBudget (see charge).
	exempt *rxMsg
	// unprovenHeld is the buffer bytes held for unproven connections.
	unprovenHeld uint64
	wholeBufs    bool   // hooks.Buffers hands out whole buffers for free (WholeBufferPool)
	connBytes    uint64 // cfg.ConnCharge()
	// chunkFree holds receive chunks the engine recycles itself, by class (chunks.go);
	// chunkFreeBytes is their capacity in total.
	chunkFree      [numClasses][][]byte
	chunkFreeBytes uint64

	heldAcks []*conn // connections whose ACK may wait for outgoing data (receiver.go releaseHeld)

	freeMsgs []*txMsg
	freeRxs  []*rxMsg
	pkt      wire.Packet // scratch for decoding and encoding
	stats    Stats
	lastNow  int64 // latest time the driver passed in, for snapshots (Conns)

	auth *authEngine // packet authentication (auth.go); nil when off
	pull puller      // receiver-driven credit's receiver half (credit.go); nil: sender-driven cc

	aliasPayload bool // SetPayloadAlias

	// Loss recovery (recovery.go): the mode's recoverer (nil: the SACK-gap rule alone)
	// and its SACK-gap threshold.
	rec  recoverer
	rthr int
	ec   *ecCodec // erasure coding (ec.go); nil unless the mode is "ec"
}

// NewEndpoint returns an engine for cfg, drawing connection IDs, initial sequence numbers
// and EVs from rng. hooks, at most one, are the driver's extensions (Hooks); none: the
// engine alone.
func NewEndpoint(cfg Config, rng *rand.Rand, hooks ...Hooks) (*Endpoint, error) {
	if len(hooks) > 1 {
		return nil, fmt.Errorf("transport: NewEndpoint takes at most one Hooks, got %d", len(hooks))
	}
	var h Hooks
	if len(hooks) == 1 {
		h = hooks[0]
	}
	pre, err := cfg.validate(&h)
	if err == nil {
		err = h.validate()
	}
	if err != nil {
		return nil, fmt.Errorf("transport config: %w", err)
	}
	if rng == nil {
		return nil, fmt.Errorf("transport: NewEndpoint needs a random source")
	}
	if err := cfg.CheckLinked(); err != nil {
		return nil, fmt.Errorf("transport config: %w", err)
	}
	h.resolve(pre)
	wp, ok := h.Buffers.(WholeBufferPool)
	whole := ok && wp.Whole()
	if err := cfg.checkProfile(&h); err != nil {
		return nil, fmt.Errorf("transport config: %w", err)
	}
	auth, err := newAuth(&cfg)
	if err != nil {
		return nil, fmt.Errorf("transport config: %w", err)
	}
	newPull, err := newPuller(&cfg)
	if err != nil {
		return nil, fmt.Errorf("transport config: %w", err)
	}
	cfg.Ack.CompleteDelay = cfg.completeDelay()
	rmode, rthr, _ := cfg.recoveryParams()
	e := &Endpoint{
		rthr:      rthr,
		auth:      auth,
		wholeBufs: whole,
		connBytes: cfg.ConnCharge(),
		cfg:       cfg,
		hooks:     h,
		rng:       rng,
		conns:     make(map[uint64]*conn),
		byPeer:    make(map[peerKey]*conn),
		twLocal:   make(map[uint64]struct{}),
		twPeer:    make(map[peerKey]struct{}),
	}
	e.rec = rmode.newRecoverer(e)
	if newPull != nil {
		e.pull = newPull(e)
	}
	if r, ok := e.rec.(*ecRecovery); ok {
		e.ec = r.ecCodec
	}
	return e, nil
}

// lookup returns the live connection with local ID id, nil if there is none.
func (e *Endpoint) lookup(id uint64) *conn {
	if c := e.lastConn; c != nil && c.id == id {
		return c
	}
	c := e.conns[id]
	if c != nil {
		e.lastConn = c
	}
	return c
}

// Config returns the endpoint's configuration (with defaults filled in).
func (e *Endpoint) Config() Config { return e.cfg }

// SetPayloadAlias lets PollTransmit return a data packet's payload in Transmit.Payload, a
// slice of the message's own bytes, instead of copying it into the buffer behind the
// header: for drivers whose socket sends both as one datagram (iovecs). Not with
// authentication or encryption on, which seal the datagram whole in the buffer, nor for
// payloads under 512 bytes: those are copied as before. Off by default.
func (e *Endpoint) SetPayloadAlias(on bool) { e.aliasPayload = on }

// Stats returns a snapshot of the endpoint's counters.
func (e *Endpoint) Stats() Stats { return e.stats }

// NumConns returns the number of live connections.
func (e *Endpoint) NumConns() int { return len(e.list) }

func (e *Endpoint) newID() uint64 {
	for {
		id := e.rng.Uint64()
		if n := uint64(e.hooks.IDShards); n > 1 {
			id = withShard(id, n, uint64(e.hooks.IDShard))
		}
		if id == 0 {
			continue
		}
		if _, ok := e.conns[id]; ok {
			continue
		}
		if _, ok := e.twLocal[id]; ok {
			continue
		}
		return id
	}
}

// withShard returns id with its low byte changed to the nearest value whose remainder
// modulo n is shard (n in 2..256, shard < n): the ID names its engine shard
// (Hooks.IDShards) and keeps 56 random bits plus the low byte's quotient.
func withShard(id, n, shard uint64) uint64 {
	low := id&0xff - id&0xff%n + shard
	if low > 0xff {
		low -= n
	}
	return id&^0xff | low
}

// ShardOfID returns the engine shard an ID chosen with Hooks.IDShards = n names.
func ShardOfID(id ConnID, n int) int {
	if n <= 1 {
		return 0
	}
	return int(uint64(id)&0xff) % n
}

// Dial opens a connection to peer. No packet is exchanged until the first message: data
// may flow at once, and the connection is established by whichever packet arrives first.
func (e *Endpoint) Dial(now int64, peer netip.AddrPort) (ConnID, error) {
	if !peer.IsValid() {
		return 0, fmt.Errorf("transport: dial %v: invalid address", peer)
	}
	if err := e.authDial(now, peer); err != nil {
		return 0, err
	}
	if !e.twRoom(now, false) {
		return 0, fmt.Errorf("transport: dial %v: %w", peer, ErrTimeWaitFull)
	}
	if len(e.list) >= e.cfg.MaxConns && !e.evictUnproven(now) {
		return 0, fmt.Errorf("transport: dial %v: max_conns (%d) connections open", peer, e.cfg.MaxConns)
	}
	c := e.newConn(now, peer, 0)
	e.stats.ConnsOpened++
	e.touch(c, now) // arm its idle deadline: a dial that never sends is forgotten too
	return ConnID(c.id), nil
}

// Send queues msg on connection id and returns its message ID. The engine keeps a
// reference to msg until a MessageSent or MessageFailed event for it: do not modify it.
func (e *Endpoint) Send(now int64, id ConnID, msg []byte) (uint32, error) {
	c := e.lookup(uint64(id))
	if c == nil {
		return 0, ErrUnknownConn
	}
	if len(msg) == 0 {
		return 0, ErrEmpty
	}
	if len(msg) > e.cfg.MaxMessage {
		return 0, fmt.Errorf("%w: %d > %d bytes", ErrTooLarge, len(msg), e.cfg.MaxMessage)
	}
	if c.closeReq || c.peerClosed {
		return 0, ErrClosed
	}
	m := e.allocMsg()
	m.id = c.nextMsgID
	m.data = msg
	m.n = len(msg)
	m.streamStart = c.streamNext
	c.nextMsgID++
	c.streamNext += streamLen(len(msg))
	if !c.outstanding() {
		c.lastProgress = now
		if c.credit != nil && c.inflight == 0 {
			c.credit.Respeculate() // EQDS: a new burst starts speculatively
		}
	}
	c.msgs.push(m)
	e.markReady(c)
	e.touch(c, now)
	return m.id, nil
}

// ConnCharge is what one connection's state costs at most, bytes, before anything is
// sent on it (Stats.ConnHeld counts it per live connection, so MaxConns x ConnCharge
// bounds it): the connection's record, controller and balancer, its receive PSN tracker
// (PSNWindow bits), its entries in the endpoint's tables and an empty message map. The
// send window (PSNWindow records) is allocated when the application first sends on it
// and is the application's, not the peer's, to spend. TestLedgerMatchesHeap measures it.
func (c *Config) ConnCharge() uint64 {
	n := uint64(connBaseBytes) + uint64(c.PSNWindow)/8
	if _, _, nsub := c.recoveryParams(); nsub > 1 {
		n += uint64(nsub) * uint64(unsafe.Sizeof(subflow{}))
	}
	return n
}

// HeldBound is the most an engine with this configuration holds for its peers, bytes:
// RecvBudget plus one message's charge (Stats.RecvBuffered), MaxConns connections at
// ConnCharge (Stats.ConnHeld), MaxConns+MaxTimeWait TIME_WAIT entries at TimeWaitCharge
// (Stats.TimeWaitHeld) and its free lists of chunks and message records. Each engine
// shard of a daemon has its own.
func (c *Config) HeldBound() uint64 {
	return uint64(c.RecvBudget) + c.maxMsgCharge(c.MaxMessage) + uint64(c.MaxConns)*c.ConnCharge() +
		uint64(c.MaxConns+c.MaxTimeWait)*TimeWaitCharge + maxFreeChunkBytes + maxFreeRx*msgRecBytes
}

// connBaseBytes is ConnCharge but for the PSN tracker and subflows: the conn record is
// 1.2 KiB, the controller, balancer, maps and lists about 1 KiB more.
const connBaseBytes = 3072

// MsgOverhead is the flow-control charge of a message beyond its bytes: each message
// occupies len+MsgOverhead bytes of the connection's stream space, so that a peer cannot
// make the receiver hold unbounded per-message state with tiny messages.
const MsgOverhead = 256

func streamLen(n int) uint64 { return uint64(n) + MsgOverhead }

// Close closes connection id cleanly: messages already queued are still sent, then the
// peer is told and both sides release the connection. A ConnClosed event follows.
func (e *Endpoint) Close(now int64, id ConnID) error {
	c := e.conns[uint64(id)]
	if c == nil {
		return ErrUnknownConn
	}
	if c.closeReq {
		return nil
	}
	c.closeReq = true
	e.markReady(c)
	e.touch(c, now)
	return nil
}

// Abort drops connection id at once: every outstanding message fails with ErrAborted and
// the peer is sent a RESET.
func (e *Endpoint) Abort(now int64, id ConnID) error {
	c := e.conns[uint64(id)]
	if c == nil {
		return ErrUnknownConn
	}
	e.abort(now, c, ErrAborted)
	return nil
}

// PollEvent returns the next event for the application, if any.
func (e *Endpoint) PollEvent() (Event, bool) {
	if e.events.len() == 0 {
		return Event{}, false
	}
	return e.events.pop(), true
}

func (e *Endpoint) emit(ev Event) { e.events.push(ev) }

// NextTimeout returns the earliest time HandleTimeout should be called, and false when
// no timer is armed.
func (e *Endpoint) NextTimeout() (int64, bool) {
	d := int64(math.MaxInt64)
	if len(e.theap) > 0 {
		d = e.theap[0].dl
	}
	if e.twQueue.len() > 0 && e.twQueue.peek().expiry < d {
		d = e.twQueue.peek().expiry
	}
	if t, ok := e.pullDeadline(); ok && t < d {
		d = t
	}
	return d, d != math.MaxInt64
}

// HandleTimeout runs every timer that expired at or before now.
func (e *Endpoint) HandleTimeout(now int64) {
	e.lastNow = max(e.lastNow, now)
	e.expireTimeWait(now)
	e.due = e.expired(e.due[:0], now)
	for i, c := range e.due {
		if !c.dead {
			e.onTimer(now, c)
		}
		e.due[i] = nil
	}
}

// markReady queues c for PollTransmit.
func (e *Endpoint) markReady(c *conn) {
	if !c.inReady && !c.dead {
		c.inReady = true
		e.ready.push(c)
	}
}

// PollTransmit writes the next datagram to send into buf and describes it. buf should
// hold at least MaxDatagram(cfg) bytes (MTU + wire.DataHdrLen, at least wire.MaxAckLen,
// plus seal.Overhead with authentication on). It returns false when nothing may be sent
// now; NextTimeout tells when to ask again.
func (e *Endpoint) PollTransmit(now int64, buf []byte) (Transmit, bool) {
	e.lastNow = max(e.lastNow, now)
	if e.ctrl.len() > 0 {
		cp := e.ctrl.pop()
		p := &e.pkt
		p.Type, p.Flags, p.EV, p.ReplyPort = cp.typ, 0, 0, e.cfg.ListenPort
		p.DstConn, p.SrcConn = cp.dst, cp.src
		p.Reason = cp.reason
		n, err := p.Encode(buf)
		n, err = e.sealOut(now, cp.to, buf, n, err)
		if err == nil {
			e.stats.PacketsSent++
			return Transmit{N: n, To: cp.to, Control: true, Type: cp.typ}, true
		}
	}
	if e.pull != nil {
		if t, ok := e.pull.poll(now, buf); ok {
			e.stats.PacketsSent++
			return t, true
		}
	}
	for e.ready.len() > 0 {
		c := e.ready.pop()
		c.inReady = false
		if c.dead {
			continue
		}
		var t Transmit
		ok := e.transmit(now, c, buf, &t)
		if e.auth != nil { // (checked here: the call copies Transmit twice)
			t, ok = e.sealTx(now, t, ok, buf)
		}
		if ok && !c.dead {
			c.lastActive = now
			c.echoed = c.echoed || c.peerID != 0
		}
		e.touch(c, now)
		if ok {
			// Round robin: c goes to the back and is asked again after the others.
			e.markReady(c)
			e.stats.PacketsSent++
			return t, true
		}
	}
	return Transmit{}, false
}

// HandlePacket processes one received datagram. b is only read during the call.
func (e *Endpoint) HandlePacket(now int64, b []byte, m RxMeta) {
	e.lastNow = max(e.lastNow, now)
	e.stats.PacketsRecv++
	if isReturned(b) {
		e.onReturned(now, b, &m) // a trimmed header of ours a switch sent back (rts.go)
		return
	}
	if e.auth != nil {
		if b = e.openIn(now, b, &m); b == nil {
			return // not authentic (counted in Stats.Auth), or a trimmed packet's hint
		}
	}
	if len(b) < wire.CommonLen || wire.Flags(b[1])&wire.FlagBundle == 0 || b[0] != wire.Version<<4|byte(wire.TypeAck) {
		e.handle(now, b, &m) // not a bundle (BundleSplit's first test, without the call)
		return
	}
	lead, rest := wire.BundleSplit(b)
	e.handle(now, lead, &m)
	if rest != nil {
		// A held ACK that rode in its answer's datagram: the DATA behind it, like a
		// datagram of its own from the same address.
		e.stats.BundlesRecv++
		if !wire.BundledData(rest) {
			e.malformed(wire.ErrBundle)
			return
		}
		e.handle(now, rest, &m)
	}
}

// malformed counts a packet that failed to decode.
func (e *Endpoint) malformed(err error) {
	e.stats.Malformed++
	if we, ok := err.(*wire.Error); ok && we.Code >= 0 && we.Code < wire.NumErrors {
		e.stats.MalformedByKind[we.Code]++
	}
}

// handle processes one packet of a received datagram (all of it unless a bundle).
func (e *Endpoint) handle(now int64, b []byte, m *RxMeta) {
	p := &e.pkt
	if err := p.Decode(b); err != nil {
		e.malformed(err)
		return
	}
	if m.RxTime == 0 || m.RxTime > now {
		m.RxTime = now
	}
	reply := m.From
	if p.ReplyPort != 0 {
		reply = netip.AddrPortFrom(m.From.Addr(), p.ReplyPort)
	}
	var c *conn
	if p.DstConn != 0 {
		c = e.lookup(p.DstConn)
		if c == nil {
			e.unknown(reply, p)
			return
		}
		if c.peer != reply {
			// Right ID, wrong host or port: never let a third party act on a connection.
			e.stats.ProtoViolations++
			return
		}
		if c.initiator && c.peerID == 0 && IsEVPortReset(p) {
			// A dial to a daemon's EV port: fail now, not after the retransmissions.
			e.stats.UnreachableActed++
			e.abort(now, c, &UnreachableError{Peer: c.peer, Cause: UnreachableEVPort})
			return
		}
		if c.peerID != p.SrcConn {
			if c.peerID != 0 {
				e.stats.ProtoViolations++
				return
			}
			c.peerID = p.SrcConn // first packet from the peer we dialled: learn its ID
		}
		if !c.proven {
			// It echoed the ID we sent only to its address: it receives there.
			e.prove(c)
		}
	} else {
		k := peerKey{reply, p.SrcConn}
		c = e.byPeer[k]
		if c == nil {
			if p.Type != wire.TypeData {
				if p.Type == wire.TypeClose {
					// Nothing of this connection reached us: confirm so the peer can go.
					e.queueCtrl(reply, wire.TypeCloseAck, p.SrcConn, e.newID())
				} else {
					e.stats.UnknownConn++
				}
				return
			}
			if _, closed := e.twPeer[k]; closed {
				e.stats.UnknownConn++ // a late packet of a closed connection
				return
			}
			if !e.twRoom(now, true) {
				// Unacknowledged, so an honest sender resends and gets in once
				// entries expire; evicting an entry could deliver a message twice.
				e.stats.TimeWaitRefused++
				return
			}
			if len(e.list) >= e.cfg.MaxConns && !e.evictUnproven(now) {
				e.stats.UnknownConn++
				e.queueCtrl(reply, wire.TypeReset, p.SrcConn, e.newID())
				return
			}
			c = e.newConn(now, reply, p.SrcConn)
			e.byPeer[k] = c
			e.unproven.pushBack(c)
			e.stats.ConnsAccepted++
			e.emit(Event{Kind: ConnAccepted, Conn: ConnID(c.id), Peer: reply})
		}
	}
	c.lastRecv, c.lastActive = now, now
	if m.TTL != 0 && c.proven && e.cfg.HopsFromTTL {
		e.learnHops(c, m.TTL)
	}
	switch p.Type {
	case wire.TypeData:
		e.onData(now, c, p, m)
	case wire.TypeAck:
		e.onAck(now, c, p)
	case wire.TypeNack:
		e.onNack(now, c, p)
	case wire.TypeProbe:
		e.onProbe(now, c, p, m)
	case wire.TypeClose:
		if p.Reason != 0 {
			e.abort(now, c, ErrPeerReset) // the peer aborted before it learnt our ID
			return
		}
		e.onClose(now, c)
	case wire.TypeCloseAck:
		e.onCloseAck(now, c)
	case wire.TypeReset:
		e.abort(now, c, ErrPeerReset)
		return
	case wire.TypePull:
		e.onPull(now, c, p)
	}
	if !c.dead {
		e.touch(c, now)
	}
}

// unknown handles a packet addressed to a connection ID we do not hold.
func (e *Endpoint) unknown(reply netip.AddrPort, p *wire.Packet) {
	if _, ok := e.twLocal[p.DstConn]; ok {
		if p.Type == wire.TypeClose {
			e.queueCtrl(reply, wire.TypeCloseAck, p.SrcConn, p.DstConn)
		}
		return // late packets of a connection closed cleanly
	}
	e.stats.UnknownConn++
	switch p.Type {
	case wire.TypeData, wire.TypeProbe, wire.TypeAck, wire.TypeNack:
		e.queueCtrl(reply, wire.TypeReset, p.SrcConn, p.DstConn)
	case wire.TypeClose:
		e.queueCtrl(reply, wire.TypeCloseAck, p.SrcConn, p.DstConn)
	}
}

func (e *Endpoint) queueCtrl(to netip.AddrPort, t wire.Type, dst, src uint64) {
	e.queueCtrlReason(to, t, dst, src, 0)
}

func (e *Endpoint) queueCtrlReason(to netip.AddrPort, t wire.Type, dst, src uint64, reason uint32) {
	if e.ctrl.len() < maxCtrlQueue {
		e.ctrl.push(ctrlPkt{to: to, typ: t, dst: dst, src: src, reason: reason})
	}
}

// closeAborted is the CLOSE reason of a connection aborted before it learnt the peer's ID.
const closeAborted = 1

// evictUnproven makes room for a connection by evicting the oldest accepted connection
// whose peer has not proven its address; false if there is none.
func (e *Endpoint) evictUnproven(now int64) bool {
	c := e.unproven.head
	if c == nil {
		return false
	}
	e.stats.ConnsEvicted++
	e.abort(now, c, ErrEvicted)
	return true
}

// timeWait is how long a removed connection's identity is remembered: TimeWait, but at
// least as long as a peer that never learnt our ID may still resend its first-contact DATA
// (it gives up IdleTimeout after its last progress, plus one RTO in flight), or a message
// we delivered and whose ACK was lost would be delivered again on a new connection.
//
// With authentication on, a held sealed packet stays acceptable for its session's MaxAge
// (an on-path attacker is not bound by the network's packet lifetime), so the identity is
// remembered that long: a late first-contact DATA must not open a new connection and
// deliver its message again (a FuzzEngine find).
func (e *Endpoint) timeWait() int64 {
	tw := max(int64(e.cfg.TimeWait), int64(e.cfg.IdleTimeout)+int64(e.cfg.MaxRTO))
	if e.auth != nil {
		tw = max(tw, int64(e.cfg.Auth.MaxAge()))
	}
	return tw
}

// TIME_WAIT is bounded by admission, never by eviction (an evicted identity would let a
// late duplicate of a delivered message open a new connection and be delivered again).
// Each live connection may become one entry, so a new connection is admitted only while
// live connections plus entries are below MaxConns+MaxTimeWait, and a first contact (an
// unproven peer, possibly spoofed) only while unproven connections plus their entries are
// below MaxConns+MaxTimeWait/unprovenShare: a spoofer fills at most that share and cannot
// keep proven peers from dialling or being dialled.

// twRoom reports whether a new connection (unproven: a first contact) may be admitted,
// after forgetting the entries expired at now.
func (e *Endpoint) twRoom(now int64, unproven bool) bool {
	if !e.twFree(unproven) {
		e.expireTimeWait(now)
		return e.twFree(unproven)
	}
	return true
}

func (e *Endpoint) twFree(unproven bool) bool {
	if len(e.list)+e.twQueue.len() >= e.cfg.MaxConns+e.cfg.MaxTimeWait {
		return false
	}
	return !unproven || e.unproven.n+e.twUnproven < e.cfg.MaxConns+e.cfg.MaxTimeWait/unprovenShare
}

// expireTimeWait forgets the TIME_WAIT entries expired at now.
func (e *Endpoint) expireTimeWait(now int64) {
	for e.twQueue.len() > 0 && e.twQueue.peek().expiry <= now {
		t := e.twQueue.pop()
		if t.local != 0 {
			delete(e.twLocal, t.local)
		}
		if t.peer.id != 0 {
			delete(e.twPeer, t.peer)
		}
		if t.unproven {
			e.twUnproven--
		}
		e.stats.TimeWait--
		e.stats.TimeWaitHeld -= TimeWaitCharge
	}
}

// remove releases c and remembers its identity for TimeWait.
func (e *Endpoint) remove(now int64, c *conn, err error) {
	if c.dead {
		return
	}
	c.dead = true
	e.stats.ConnHeld -= e.connBytes
	unproven := c.listed
	e.unproven.remove(c)
	delete(e.conns, c.id)
	if e.lastConn == c {
		e.lastConn = nil
	}
	e.heapRemove(c)
	last := len(e.list) - 1
	e.list[c.lidx] = e.list[last]
	e.list[c.lidx].lidx = c.lidx
	e.list[last] = nil
	e.list = e.list[:last]
	k := peerKey{c.peer, c.peerID}
	if !c.initiator {
		delete(e.byPeer, k)
	} else {
		k.id = 0
	}
	if c.proven || c.deliveredAny {
		// Remember it so late packets cannot resurrect it and deliver a message twice.
		// An unproven connection that delivered nothing has nothing to protect (the
		// common case of a spoofed flood, whose entries would only fill these maps).
		e.twLocal[c.id] = struct{}{}
		if k.id != 0 {
			e.twPeer[k] = struct{}{}
		}
		e.twQueue.push(twEntry{expiry: now + e.timeWait(), local: c.id, peer: k, unproven: unproven})
		if unproven {
			e.twUnproven++
		}
		e.stats.TimeWait++
		e.stats.TimeWaitHeld += TimeWaitCharge
	}
	c.releaseRx(e)
	if err == nil {
		e.stats.ConnsClosed++
	} else {
		e.stats.ConnsAborted++
	}
	e.emit(Event{Kind: ConnClosed, Conn: ConnID(c.id), Peer: c.peer, Err: err})
}

// abort fails everything outstanding on c, tells the peer and removes c.
func (e *Endpoint) abort(now int64, c *conn, err error) {
	if c.dead {
		return
	}
	for c.msgs.len() > 0 {
		m := c.msgs.pop()
		if !m.done {
			merr := err
			if err == ErrPeerReset && m.sent == 0 {
				merr = ErrResetUnsent
			}
			e.stats.MsgsFailed++
			e.emit(Event{Kind: MessageFailed, Conn: ConnID(c.id), Peer: c.peer, MsgID: m.id, Err: merr})
		}
		e.freeMsg(m)
	}
	// Tell the peer, so it drops what it holds for us, also when a RESET made us abort:
	// a forged RESET must not leave the real peer holding an orphan. A RESET to a
	// connection that no longer exists is not answered, so this cannot loop.
	if c.peerID != 0 {
		e.queueCtrl(c.peer, wire.TypeReset, c.peerID, c.id)
	} else if c.initiator {
		// The peer knows us only by (address, our ID): an abort-CLOSE is the packet it
		// can match without its ID.
		e.queueCtrlReason(c.peer, wire.TypeClose, 0, c.id, closeAborted)
	}
	e.remove(now, c, err)
}

func (e *Endpoint) allocMsg() *txMsg {
	if n := len(e.freeMsgs); n > 0 {
		m := e.freeMsgs[n-1]
		e.freeMsgs = e.freeMsgs[:n-1]
		return m
	}
	return new(txMsg)
}

func (e *Endpoint) freeMsg(m *txMsg) {
	*m = txMsg{}
	e.freeMsgs = append(e.freeMsgs, m)
}

// ConnInfo is a snapshot of one connection's state, for status displays and metrics.
type ConnInfo struct {
	ID          ConnID
	Peer        netip.AddrPort
	Initiator   bool
	SRTT        int64 // smoothed RTT, ns (0 before the first sample)
	RTO         int64 // current retransmission timeout, ns
	Window      int   // congestion window, bytes
	PacingRate  int64 // bytes/s, 0 if unpaced
	InFlight    int   // payload bytes in flight
	QueuedMsgs  int   // outgoing messages not yet acknowledged
	RecvBuffers uint64
	Closing     bool
	// Freezing: the load balancer is in freezing mode (a suspected path failure).
	Freezing bool
	// FreezeEpisodes counts the times the load balancer entered freezing mode.
	FreezeEpisodes uint64
	// BytesAcked is the payload bytes the peer has acknowledged on this connection (a
	// sender's network progress); BytesReceived the new payload bytes received on it.
	BytesAcked, BytesReceived uint64
	// QuickAdapts counts the controller's QuickAdapt firings (SMaRTT; 0 for others).
	QuickAdapts uint64
	// CCCuts counts the controller's window or rate decreases (0 for those that report none).
	CCCuts uint64
	// PathHops is the path length learnt from the peer's IP TTLs (Config.HopsFromTTL;
	// HopsFromTTL), -1 while unknown.
	PathHops int
}

// Conns appends a snapshot of every live connection to dst and returns it.
func (e *Endpoint) Conns(dst []ConnInfo) []ConnInfo {
	for _, c := range e.list {
		dst = append(dst, e.connInfo(c))
	}
	return dst
}

// ConnInfo returns a snapshot of connection id (false if it is not live).
func (e *Endpoint) ConnInfo(id ConnID) (ConnInfo, bool) {
	c := e.conns[uint64(id)]
	if c == nil || c.dead {
		return ConnInfo{}, false
	}
	return e.connInfo(c), true
}

func (e *Endpoint) connInfo(c *conn) ConnInfo {
	ci := ConnInfo{
		ID: ConnID(c.id), Peer: c.peer, Initiator: c.initiator,
		SRTT: c.srtt, RTO: c.rto(&e.cfg), Window: c.cc.Window(), PacingRate: c.cc.PacingRate(),
		InFlight: c.inflight, QueuedMsgs: c.msgs.len(), RecvBuffers: c.held,
		BytesAcked: c.bytesAcked, BytesReceived: c.bytesRecv,
		Closing: c.closeReq || c.peerClosed, PathHops: -1,
	}
	if c.hopsSeen {
		ci.PathHops = int(c.ttlHops)
	}
	if f, ok := c.lb.(reps.Freezer); ok {
		ci.Freezing, ci.FreezeEpisodes = f.Freezing(e.lastNow), f.FreezeEpisodes()
	}
	if c.ccStats != nil {
		st := c.ccStats.CCStats()
		ci.QuickAdapts, ci.CCCuts = st.QuickAdapts, st.Cuts
	}
	return ci
}
