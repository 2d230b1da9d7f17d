package transport

import (
	"math"
	"math/bits"
	"net/netip"

	"github.com/smartt-transport/smartt/ackpath"
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/pacing"
	"github.com/smartt-transport/smartt/reps"
	"github.com/smartt-transport/smartt/transport/wire"
)

// Packet states in the sender's window.
const (
	pktAcked    = iota // acknowledged (or slot unused)
	pktInflight        // sent, waiting for its ACK
	pktLost            // judged lost, queued for retransmission
)

// sentPkt is the sender's record of one PSN.
type sentPkt struct {
	msg    *txMsg
	off    uint32
	size   uint32
	sentAt int64
	seq    uint64 // transmission sequence number of its latest transmission
	tx     uint16 // transmissions so far
	trims  uint16 // transmissions of those that the peer NACKed (trimmed on the way)
	sr     uint8  // packet state (pktAcked...) in the low bits, ret above them: see state, ret
	cause  cc.LossCause
	ev     uint16
}

// sentPkt.sr packs the packet state and the return mark into one byte, keeping the
// record at 40 bytes: one per PSN-window slot of every connection adds up.
const (
	srStateMask = 0x3
	srRetShift  = 2
)

// state is the packet's state: pktAcked, pktInflight or pktLost.
func (sp *sentPkt) state() uint8 { return sp.sr & srStateMask }

// setState sets the packet's state, keeping its return mark.
func (sp *sentPkt) setState(st uint8) { sp.sr = sp.sr&^srStateMask | st }

// ret is 0, or retActed or retIgnored when a returned header named it (rts.go).
func (sp *sentPkt) ret() uint8 { return sp.sr >> srRetShift }

// setRet sets the return mark, keeping the packet's state.
func (sp *sentPkt) setRet(r uint8) { sp.sr = sp.sr&srStateMask | r<<srRetShift }

// lossGoBack is the sentPkt.cause of a packet resent by a go-back-N NACK (recovery
// "gobackn"); congestion control and the balancer are told cc.LossSack.
const lossGoBack cc.LossCause = 0x80

// timeEntry is one transmission in send order, for RTO and SACK-gap detection.
type timeEntry struct {
	psn uint32
	seq uint64
}

// unacked reports whether the packet is in flight or lost: what an ACK may newly
// acknowledge (ackPkt).
func (sp *sentPkt) unacked() bool { st := sp.state(); return st == pktInflight || st == pktLost }

// txMsg is an outgoing message.
type txMsg struct {
	id          uint32
	data        []byte // nil once every byte is acknowledged
	n           int    // message length
	streamStart uint64
	sent        int  // bytes segmented so far
	acked       int  // bytes acknowledged
	allAcked    bool // every byte acknowledged (ordered: delivery not yet confirmed)
	done        bool // reported sent
}

// end is the stream offset after m: the receiver's Delivered passes it once m is delivered.
func (m *txMsg) end() uint64 { return m.streamStart + streamLen(m.n) }

// rxMsg is an incoming message being reassembled.
type rxMsg struct {
	id          uint32
	n           int // message length
	streamStart uint64
	got         int        // distinct bytes received (the total length of spans)
	spans       []span     // the byte ranges received, sorted and disjoint (coverage.go)
	buf         []byte     // the whole buffer (small messages, whole-buffer pools)
	chunks      [][]byte   // large messages: chunk i holds bytes [i, i+1) x RecvChunk, nil until data arrives
	held        uint64     // buffer bytes allocated for it (counted in Stats.RecvBuffered)
	ec          []*ecBlock // recovery "ec": blocks holding parity (ec.go)
	anchor      ecAnchor   // recovery "ec": its PSN numbering, from its data (ec.go)
	place       []byte     // the Placer's buffer for the whole message; chunks are slices of it
	placeTok    uint64     // its token (Placer.Unplace, Event.Placed)
	placeTried  bool       // the Placer was asked (once, at the offset-0 packet)
	whole       bool       // a large message in one buffer all the same (wholeNow)
}

// nackEntry is a NACK waiting to leave.
type nackEntry struct {
	goBack bool // recovery "gobackn": resend everything from psn on
	rnr    bool // receiver not ready (rnr.go): resend psn after a back-off
	psn    uint32
	ev     uint16
	ce     bool
	txTime int64
	rxTime int64
}

// trigger is the data packet the next ACK reports on.
type trigger struct {
	psn    uint32
	ev     uint16
	ce     bool
	txTime int64
	rxTime int64
}

// conn is one connection: its identity, its place in the endpoint's tables and
// timers, the controller, balancer and pacer it was wired to, and its halves: the
// sender (sendState), the receiver (recvState) and the held ACK (ackHold).
type conn struct {
	id, peerID uint64
	peer       netip.AddrPort
	initiator  bool
	// proven: the peer has shown it receives at its address (it echoed our ID, or we
	// dialled it). Unproven accepted connections are cheap to evict and expire soon.
	proven bool
	// echoed: we have sent the peer a packet carrying its ID (the dialler's proof).
	echoed       bool
	createdAt    int64
	lidx         int   // index in Endpoint.list
	listed       bool  // in Endpoint.unproven
	lprev, lnext *conn // Endpoint.unproven links
	lastRecv     int64 // last packet from the peer
	lastActive   int64 // last packet either way
	inReady      bool
	dead         bool
	dl           int64 // cached next deadline (math.MaxInt64: none)
	hidx         int32 // index in the endpoint's timer heap (-1: not in it)
	// ctrlEV is the EV of the connection's next control packet (ACK, NACK, probe, CLOSE,
	// CLOSE_ACK); it advances by one with each, from a random start, so control traffic
	// spreads over the reverse paths whatever the balancer does with data.
	ctrlEV  uint16
	cc      cc.Controller
	lb      reps.Balancer
	pacer   pacing.Pacer
	lbAcks  reps.CoalescedAcker // lb if it takes coalesced ACKs whole, else nil
	ccStats cc.StatsReporter    // cc (or the controller it wraps) if it reports counters, else nil
	credit  creditGate          // cc if it sends only against PULL credit (EQDS), else nil
	// Close.
	closeReq    bool // the application asked to close
	peerClosed  bool // the peer sent CLOSE
	closeSentAt int64
	closeTries  int

	sendState
	recvState
	ackHold
}

func (e *Endpoint) newConn(now int64, peer netip.AddrPort, peerID uint64) *conn {
	cfg := &e.cfg
	c := &conn{
		id:         e.newID(),
		peerID:     peerID,
		peer:       peer,
		initiator:  peerID == 0,
		proven:     peerID == 0,
		createdAt:  now,
		lastRecv:   now,
		lastActive: now,
		dl:         math.MaxInt64,
		ctrlEV:     uint16(e.rng.IntN(cfg.EVS)),
		cc:         e.hooks.NewCC(),
		lb:         e.hooks.NewBalancer(e.rng),
		pacer:      pacing.Pacer{Burst: cfg.PacingBurst},
		sendState: sendState{
			mask:         uint32(cfg.PSNWindow - 1),
			peerWindow:   uint64(cfg.RecvWindow),
			lastProgress: now,
		},
		recvState: recvState{
			coal: ackpath.NewCoalescer(cfg.Ack),
		},
	}
	c.lbAcks, _ = c.lb.(reps.CoalescedAcker)
	c.run = cfg.REPS.Run.Len()
	c.ccStats = statsReporter(c.cc)
	c.credit = creditGateOf(c.cc)
	if e.rec != nil {
		e.rec.newConn(c)
	}
	c.sndUna = e.rng.Uint32()
	c.sndNxt = c.sndUna
	e.conns[c.id] = c
	e.stats.ConnHeld += e.connBytes
	c.lidx = len(e.list)
	e.list = append(e.list, c)
	e.heapPush(c)
	return c
}

// touch recomputes c's next deadline. It runs for every packet either way, so the
// timers that are seldom armed are tested together first and the heap is left alone
// when the deadline did not move.
func (e *Endpoint) touch(c *conn, now int64) {
	cfg := &e.cfg
	d := int64(math.MaxInt64)
	if _, sp := c.headEntry(); sp != nil {
		d = sp.sentAt + c.rto(cfg)
	}
	if c.coal.Pending() {
		if t, ok := c.coal.Deadline(); ok && t < d {
			d = t
		}
	}
	if c.paceAt|c.probeAt|c.rnrAt|c.closeSentAt != 0 {
		d = c.rareDeadline(cfg, d)
	}
	if c.outstanding() {
		if t := c.lastProgress + int64(cfg.IdleTimeout); t < d {
			d = t
		}
	} else if t := c.idleDeadline(cfg); t < d {
		d = t
	}
	if d == c.dl {
		return
	}
	c.dl = d
	// Restore the heap only when c is out of order with its parent or a child (most
	// deadlines move within their place).
	if i, h := int(c.hidx), e.theap; i >= 0 && (i > 0 && h[(i-1)/2].dl > d ||
		2*i+1 < len(h) && h[2*i+1].dl < d || 2*i+2 < len(h) && h[2*i+2].dl < d) {
		e.heapFixAt(i)
	}
}

// rareDeadline is touch for the pacing, probe, RNR and CLOSE timers: the earliest of d
// and those armed (> 0).
func (c *conn) rareDeadline(cfg *Config, d int64) int64 {
	if c.paceAt > 0 && c.paceAt < d {
		d = c.paceAt
	}
	if c.probeAt > 0 && c.probeAt < d {
		d = c.probeAt
	}
	if c.rnrAt > 0 && c.rnrAt < d {
		d = c.rnrAt
	}
	if c.closeSentAt > 0 {
		if t := c.closeSentAt + c.rto(cfg); t < d {
			d = t
		}
	}
	return d
}

// onTimer handles whatever of c's timers expired.
func (e *Endpoint) onTimer(now int64, c *conn) {
	cfg := &e.cfg
	if c.outstanding() && now-c.lastProgress >= int64(cfg.IdleTimeout) {
		e.abort(now, c, withPeer(c, ErrIdle))
		return
	}
	if now >= c.idleDeadline(cfg) {
		e.expire(now, c)
		return
	}
	rto := c.rto(cfg)
	fired := false
	for {
		t, sp := c.headEntry()
		if sp == nil || sp.sentAt+rto > now {
			break
		}
		e.stats.Timeouts++
		// Back off only when a retransmission times out (the path may be dead): the
		// first transmissions of a burst lost at once each expire one RTO after they
		// left, as a trimmed burst would be NACKed, instead of one per doubled RTO.
		fired = fired || sp.tx > 1
		e.declareLost(now, c, t.psn, cc.LossTimeout)
		if e.rec != nil {
			e.rec.timedOut(now, c, t.psn)
		}
	}
	if fired && c.backoff < 16 {
		c.backoff++ // back off until an ACK shows progress
	}
	if c.paceAt > 0 && c.paceAt <= now {
		c.paceAt = 0
		e.markReady(c)
	}
	if c.probeAt > 0 && c.probeAt <= now {
		e.markReady(c) // transmit sends the probe
	}
	if c.rnrAt > 0 && c.rnrAt <= now {
		c.rnrAt = 0 // the back-off is over: resend the refused packet
		e.markReady(c)
	}
	if c.coal.Due(now) {
		e.markReady(c)
	}
	if c.closeSentAt > 0 && c.closeSentAt+rto <= now {
		if c.closeTries >= cfg.CloseRetries {
			e.remove(now, c, ErrAborted)
			return
		}
		c.closeSentAt = 0 // transmit resends the CLOSE
		e.markReady(c)
	}
	e.touch(c, now)
}

// declareLost moves an in-flight packet to the retransmission queue and tells CC and LB.
func (e *Endpoint) declareLost(now int64, c *conn, psn uint32, cause cc.LossCause) {
	e.declareLostAs(now, c, psn, cause, cause)
}

// declareLostAs is declareLost recording why as the packet's own cause (which counter
// its retransmission goes to) and telling CC and LB cause.
func (e *Endpoint) declareLostAs(now int64, c *conn, psn uint32, cause, why cc.LossCause) {
	sp := &c.pkts[psn&c.mask]
	if sp.state() != pktInflight {
		return
	}
	sp.setState(pktLost)
	sp.cause = why
	if cause == cc.LossSack {
		e.stats.LostSack++
	}
	c.inflight -= int(sp.size)
	c.retxq.push(psn)
	c.cc.OnLoss(cc.Loss{Now: now, Bytes: int(sp.size), Cause: cause, EV: sp.ev, InFlight: c.inflight})
	c.lb.OnLoss(now, sp.ev, cause)
	if sp.ev == c.runEV {
		c.runLeft = 0 // the run's path may be failing: ask the balancer again
	}
	e.markReady(c)
}

// nextEV returns the EV of a data packet: the balancer's choice once per run of
// REPS.Run new packets (reps.Config.Run), each retransmission's own.
func (c *conn) nextEV(now int64, size int, retx bool) uint16 {
	if retx {
		return c.lb.NextEV(now, size, true)
	}
	if c.runLeft > 0 {
		c.runLeft--
		return c.runEV
	}
	ev := c.lb.NextEV(now, size, false)
	c.runEV, c.runLeft = ev, c.run-1
	return ev
}

// transmit produces c's next datagram into buf, control first, then retransmissions,
// then new data, and describes it in *t (only when it reports true). The producers fill
// the caller's Transmit in place: returned by value it was copied at every level.
func (e *Endpoint) transmit(now int64, c *conn, buf []byte, t *Transmit) bool {
	return e.transmitControl(now, c, buf, t) || e.transmitData(now, c, buf, t)
}

// header starts a control packet of c with entropy value ev.
func (e *Endpoint) header(c *conn, t wire.Type, ev uint16) *wire.Packet {
	p := &e.pkt
	p.Type, p.Flags, p.EV, p.ReplyPort = t, 0, ev, e.cfg.ListenPort
	p.DstConn, p.SrcConn = c.peerID, c.id
	p.Payload = nil
	return p
}

// control encodes control packet p of c into buf and describes it in *t, which is zero
// (PollTransmit's): field by field, as a literal costs a whole-struct copy per packet.
func (e *Endpoint) control(c *conn, p *wire.Packet, buf []byte, t *Transmit) bool {
	n, err := p.Encode(buf)
	if err != nil {
		return false
	}
	t.N, t.To, t.EV, t.Control, t.Type = n, c.peer, p.EV, true, p.Type // ECN NotECT: zero
	return true
}

func (e *Endpoint) transmitControl(now int64, c *conn, buf []byte, t *Transmit) bool {
	if c.nacks.len() > 0 && c.peerID != 0 {
		nk := c.nacks.pop()
		p := e.header(c, wire.TypeNack, c.nextCtrlEV(&e.cfg))
		if nk.ce {
			p.Flags |= wire.FlagCE
		}
		if nk.goBack {
			p.Flags |= wire.FlagGoBack
		}
		if nk.rnr {
			p.Flags |= wire.FlagRNR
		}
		p.Nack = wire.Nack{PSN: nk.psn, CumPSN: c.tracker.Cum(), EchoEV: nk.ev,
			HoldTime: holdTime(now, nk.rxTime), EchoTxTime: nk.txTime}
		e.stats.NacksSent++
		return e.control(c, p, buf, t)
	}
	// A held ACK (ack.complete_delay) rides ahead of data (ackRide), and goes at once when
	// either side closes: no answer will come.
	held := c.coal.Held() && (c.ackRide || c.closeReq || c.peerClosed)
	if c.rxInit && c.peerID != 0 && (c.ackNow || c.coal.Due(now) || held) {
		return e.buildAck(now, c, buf, t)
	}
	if c.probeAt > 0 && c.probeAt <= now && c.peerID != 0 {
		p := e.header(c, wire.TypeProbe, c.nextCtrlEV(&e.cfg))
		p.Probe = now
		c.probeAt = now + c.rto(&e.cfg)
		c.lastProbeTx = now
		e.stats.ProbesSent++
		return e.control(c, p, buf, t)
	}
	if c.peerClosed && !c.outstanding() {
		// Our side is drained: confirm the peer's CLOSE and go.
		p := e.header(c, wire.TypeCloseAck, c.nextCtrlEV(&e.cfg))
		ok := e.control(c, p, buf, t)
		e.remove(now, c, nil)
		return ok
	}
	if c.closeReq && !c.outstanding() && c.closeSentAt == 0 {
		if c.peerID == 0 {
			e.remove(now, c, nil) // nothing ever reached the peer
			return false
		}
		p := e.header(c, wire.TypeClose, c.nextCtrlEV(&e.cfg))
		p.Reason = 0
		c.closeSentAt = now
		c.closeTries++
		return e.control(c, p, buf, t)
	}
	return false
}

// nextCtrlEV returns the EV of c's next control packet and advances the rotation.
func (c *conn) nextCtrlEV(cfg *Config) uint16 {
	ev := c.ctrlEV
	c.ctrlEV = uint16((int(ev) + 1) % cfg.EVS)
	return ev
}

func holdTime(now, rx int64) uint32 {
	h := now - rx
	if h < 0 {
		return 0
	}
	if h > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(h)
}

// buildAck writes c's next ACK, on the next EV of c's control rotation: a connection's
// ACKs take every reverse path in turn, so a failed link costs only the ACKs hashed onto
// it (the next one carries the same cumulative and SACK state). With ack.echo_ev the ACK
// takes the EV it echoes instead (htsim's rule).
func (e *Endpoint) buildAck(now int64, c *conn, buf []byte, t *Transmit) bool {
	tr := &c.trig
	if c.probeEcho > 0 && !c.coal.Pending() {
		// Answering a probe: echo its timestamp.
		*tr = trigger{psn: c.tracker.Cum() - 1, ev: c.probeEV, txTime: c.probeEcho, rxTime: now}
	}
	ev := tr.ev
	switch {
	case c.ackRide:
		ev = c.rideEV // the data packet's: the driver's socket for it sends both at once
	case !e.cfg.Ack.EchoEV:
		ev = c.nextCtrlEV(&e.cfg)
	}
	p := e.header(c, wire.TypeAck, ev)
	a := &p.Ack
	words := e.cfg.Ack.SackWords
	a.CumPSN = c.tracker.Cum()
	a.SackBase = c.tracker.SackBase(tr.psn, words)
	a.SackWords = uint8(words)
	c.tracker.Sack(a.SackBase, words, &a.Sack)
	a.AckedPSN = tr.psn
	a.EchoEV = tr.ev
	a.EchoTxTime = tr.txTime
	a.HoldTime = holdTime(now, tr.rxTime)
	a.Delivered = c.delivered
	a.Window = uint32(e.cfg.RecvWindow)
	if tr.ce {
		p.Flags |= wire.FlagCE
	}
	if c.rxINT.Cap != 0 {
		// Echo the telemetry of the last data packet that carried some.
		p.Flags |= wire.FlagINT
		p.INT = c.rxINT
		p.INT.Cap = p.INT.N
		c.rxINT.Cap = 0 // each record is echoed once
	}
	if c.coal.Held() {
		if c.ackRide {
			e.stats.AcksRode++
			c.holdMiss, c.holdBack = 0, 0
		} else if c.holdMiss++; c.holdMiss >= 2 {
			// Two holds in a row ran out (or a probe cut them short) with no answer to
			// ride with: the peer sends one-way, so its next completions are ACKed at
			// once, holdBackoff of them and twice as many each time this recurs without
			// a ride in between (up to maxHoldBackoff), so that unanswered holds cost a
			// one-way sender a vanishing share of its messages. One late answer (a slow
			// reply) is not enough.
			c.holdBack = min(max(2*c.holdBack, holdBackoff), maxHoldBackoff)
			c.holdSkip, c.holdMiss = c.holdBack, 0
		}
	}
	c.coal.Take(p)
	c.ackNow, c.ackRide = false, false
	c.probeEcho = 0
	e.stats.AcksSent++
	return e.control(c, p, buf, t)
}

// holdBackoff is how many completions of a connection are ACKed at once after held ACKs
// went unanswered (ack.complete_delay), the first time; maxHoldBackoff bounds its doubling.
const (
	holdBackoff    = 16
	maxHoldBackoff = 1024
)

// canSendMsg applies the peer's flow control to message m.
func (c *conn) canSendMsg(m *txMsg) bool {
	return m.streamStart == c.peerDelivered ||
		m.end() <= c.peerDelivered+c.peerWindow
}

func (e *Endpoint) transmitData(now int64, c *conn, buf []byte, t *Transmit) bool {
	cfg := &e.cfg
	if c.rnrWait(now) {
		return false
	}
	// Retransmissions first; skip entries acknowledged since they were queued.
	for c.retxq.len() > 0 {
		psn := *c.retxq.peek()
		sp := &c.pkts[psn&c.mask]
		if !wire.SeqLEQ(c.sndUna, psn) || !wire.SeqLess(psn, c.sndNxt) || sp.state() != pktLost {
			c.retxq.pop()
			continue
		}
		if !e.windowOpen(now, c, int(sp.size), true) {
			return false
		}
		lead := 0
		if len(e.heldAcks) > 0 {
			if lead = e.rideHeld(now, c, int(sp.size), true, buf); lead < 0 {
				return false
			}
		}
		if sp.cause == cc.LossTrim || sp.cause == lossGoBack {
			sp.trims++ // a NACK answered it: the peer is alive (go-back-N too)
		}
		if int(sp.tx-sp.trims) > cfg.MaxRetransmits {
			e.abort(now, c, withPeer(c, ErrRetransmits))
			return false
		}
		if int(sp.trims) > cfg.MaxTrims {
			e.abort(now, c, withPeer(c, ErrTrims))
			return false
		}
		c.retxq.pop()
		switch sp.cause {
		case cc.LossTrim, lossGoBack:
			e.stats.RetxNack++
		case cc.LossSack:
			e.stats.RetxSack++
		case lossRNR: // refused, not lost (RNRRecv counts them)
		default:
			e.stats.RetxTimeout++
		}
		e.sendData(now, c, psn, sp, buf[lead:], true, t)
		e.bundled(lead, t)
		return true
	}
	// A coded block's parity follows its last data packet (recovery "ec").
	if c.ecTx != nil && c.ecTx.pending {
		ok, blocked := e.ecParity(now, c, buf, t)
		if ok {
			return true
		}
		if blocked {
			return false
		}
	}
	// New data.
	for c.cur < c.msgs.len() {
		m := c.msgs.buf[(c.msgs.head+c.cur)&(len(c.msgs.buf)-1)]
		if m.sent == m.n {
			c.cur++
			continue
		}
		if !c.canSendMsg(m) {
			if c.inflight == 0 && c.retxq.len() == 0 && c.probeAt == 0 {
				c.probeAt = now + c.rto(cfg) // nothing will bring an ACK: probe for credit
			}
			return false
		}
		if wire.SeqDiff(c.sndNxt, c.sndUna) >= int32(cfg.PSNWindow) {
			return false
		}
		size := min(m.n-m.sent, cfg.MTU)
		if !e.windowOpen(now, c, size, false) {
			return false
		}
		lead := 0
		if len(e.heldAcks) > 0 {
			if lead = e.rideHeld(now, c, size, false, buf); lead < 0 {
				return false
			}
		}
		if c.pkts == nil {
			// The send window is allocated on first use: a connection that only
			// receives (as most accepted ones do) costs a peer little of our memory.
			c.pkts = make([]sentPkt, cfg.PSNWindow)
		}
		c.probeAt = 0
		psn := c.sndNxt
		c.sndNxt++
		sp := &c.pkts[psn&c.mask]
		*sp = sentPkt{msg: m, off: uint32(m.sent), size: uint32(size)}
		m.sent += size
		e.stats.DataSent++
		e.stats.BytesSent += uint64(size)
		e.sendData(now, c, psn, sp, buf[lead:], false, t)
		e.bundled(lead, t)
		if c.ecTx != nil {
			e.ecOnData(c, m, psn, int(sp.off), size)
		}
		return true
	}
	if c.inflight == 0 && c.retxq.len() == 0 && c.msgs.len() > 0 && c.probeAt == 0 {
		// Every byte is acknowledged but a delivery is unconfirmed (the ACK that carried
		// the receiver's Delivered offset was lost): ask again.
		c.probeAt = now + c.rto(cfg)
	}
	return false
}

// windowOpen applies congestion window and pacing to a packet of size bytes. A packet may
// always go when nothing is in flight, so a window below one MTU cannot stall.
func (e *Endpoint) windowOpen(now int64, c *conn, size int, retx bool) bool {
	if c.credit != nil && !c.credit.CanSend(size, retx) {
		if c.inflight == 0 && c.probeAt == 0 {
			// Nothing in flight will bring a PULL: if the last one was lost, a probe
			// makes the receiver send its grant again.
			c.probeAt = now + c.rto(&e.cfg)
		}
		return false
	}
	if c.inflight > 0 && c.inflight+size > c.cc.Window() {
		return false
	}
	rate := c.paceRate(size)
	if rate > 0 {
		if t := c.pacer.Earliest(now, rate); t > now {
			c.paceAt = t
			return false
		}
	}
	e.rate = rate // sendData's, for the same packet: nothing between changes it
	return true
}

// paceRate is the controller's pacing rate, or for a window below one packet of size
// bytes, window/srtt (pacing.WindowRate), so a sub-MTU window is spread over the RTT.
func (c *conn) paceRate(size int) int64 {
	if r := c.cc.PacingRate(); r > 0 {
		return r
	}
	return pacing.WindowRate(c.cc.Window(), size, c.srtt)
}

// aliasMinPayload is the smallest payload SetPayloadAlias sends from the message's buffer:
// copying a smaller one behind the header costs less than a second iovec.
const aliasMinPayload = 512

// sendData encodes data packet psn (sp) of c into buf and describes it in *t.
func (e *Endpoint) sendData(now int64, c *conn, psn uint32, sp *sentPkt, buf []byte, retx bool, t *Transmit) {
	m := sp.msg
	sp.tx++
	sp.setState(pktInflight)
	sp.sentAt = now
	c.sendSeq++
	sp.seq = c.sendSeq
	if c.evPicked && c.pickedRetx == retx {
		sp.ev = c.pickedEV // chosen when held ACKs rode ahead on it (rideHeld)
	} else {
		sp.ev = c.nextEV(now, int(sp.size), retx)
	}
	c.evPicked = false
	c.inflight += int(sp.size)
	c.timeq.push(timeEntry{psn: psn, seq: sp.seq})
	if e.rec != nil {
		e.rec.sent(c, psn, sp)
	}
	c.pacer.OnSend(now, int(sp.size), e.rate) // windowOpen's paceRate for this packet
	if c.credit != nil {
		c.credit.OnSend(int(sp.size), retx)
	}

	p := &e.pkt
	p.Type, p.Flags, p.EV, p.ReplyPort = wire.TypeData, 0, sp.ev, e.cfg.ListenPort
	p.DstConn, p.SrcConn = c.peerID, c.id
	if retx {
		p.Flags |= wire.FlagRetx
	}
	if int(sp.off+sp.size) == m.n {
		p.Flags |= wire.FlagLast | wire.FlagAckReq
	}
	p.Data = wire.Data{
		PSN: psn, AckFloor: c.sndUna, MsgID: m.id, MsgLen: uint32(m.n),
		Offset: sp.off, PayloadLen: uint16(sp.size), StreamStart: m.streamStart, TxTime: now,
	}
	p.Payload = m.data[sp.off : sp.off+sp.size]
	if e.cfg.INT {
		// Empty slots for the switches on the path to fill (wire.StampINT).
		p.Flags |= wire.FlagINT
		p.INT.N, p.INT.Cap, p.INT.Flags = 0, uint8(e.cfg.intHops()), 0
	}
	if e.aliasPayload && e.auth == nil && sp.size >= aliasMinPayload {
		// The header alone: the payload goes out from the message's buffer (the caller
		// keeps it until the message completes, which PollTransmit cannot cause).
		n, err := p.EncodeHeader(buf)
		if err != nil {
			panic("transport: PollTransmit buffer smaller than the header: " + err.Error())
		}
		*t = Transmit{N: n, To: c.peer, EV: sp.ev, ECN: ECT0, Type: wire.TypeData, Payload: p.Payload}
		return
	}
	n, err := p.Encode(buf)
	if err != nil {
		panic("transport: PollTransmit buffer smaller than MTU + header: " + err.Error())
	}
	t.N, t.To, t.EV, t.ECN, t.Type = n, c.peer, sp.ev, ECT0, wire.TypeData // t is zero (control)
}

// onAck processes an acknowledgement on the sender side.
func (e *Endpoint) onAck(now int64, c *conn, p *wire.Packet) {
	a := &p.Ack
	e.stats.AcksRecv++
	switch e.checkAck(now, c, a) {
	case ackBad:
		e.stats.BadAcks++
		return
	case ackStale:
		e.stats.StaleAcks++
		return
	}
	if a.Delivered > c.peerDelivered {
		c.peerDelivered = a.Delivered
		c.peerWindow = uint64(a.Window)
		c.lastProgress = now
	} else if a.Delivered == c.peerDelivered {
		c.peerWindow = uint64(a.Window)
	}
	bytes, pkts := 0, 0
	// Cumulative part (checkAck made sure it ends at or before sndNxt).
	for psn := c.sndUna; wire.SeqLess(psn, a.CumPSN); psn++ {
		if b := e.ackPkt(c, psn, a); b > 0 {
			bytes += b
			pkts++
		}
	}
	// Selective part (none in order, the common case: the words are tested at once).
	if a.Sack[0]|a.Sack[1]|a.Sack[2]|a.Sack[3] != 0 {
		b, n := e.sackAcked(c, a)
		bytes += b
		pkts += n
	}
	// Slide the window.
	for c.sndUna != c.sndNxt && c.pkts[c.sndUna&c.mask].state() == pktAcked {
		c.pkts[c.sndUna&c.mask].msg = nil
		c.sndUna++
	}
	// RTT from the echoed transmit time, minus the time the ACK waited at the receiver.
	// Echoed timestamps make samples of retransmitted packets unambiguous.
	rtt := now - a.EchoTxTime - int64(a.HoldTime)
	if rtt > 0 {
		e.stats.RTTSamples++
		e.stats.RTTHist[rttBucket(rtt)]++
		c.updateRTT(rtt)
	} else {
		rtt = 0
	}
	ce := p.Flags&wire.FlagCE != 0
	if ce {
		e.stats.CEEchoed++
	}
	e.stats.CEReported += uint64(a.CECount)
	if bytes > 0 {
		c.bytesAcked += uint64(bytes)
		c.lastProgress = now
		c.backoff = 0
		c.rnrN = 0
		ack := cc.Ack{Now: now, Bytes: bytes, Packets: pkts, RTT: rtt, CE: ce,
			CECount: int(a.CECount), EV: a.EchoEV, InFlight: c.inflight}
		if p.Flags&wire.FlagINT != 0 {
			ack.INT = p.INT.Hops[:p.INT.N]
			if p.INT.N > 0 {
				e.stats.INTAcks++
			}
		}
		c.cc.OnAck(ack)
	}
	if p.Flags&wire.FlagCleanEV != 0 && c.lbAcks != nil {
		c.lbAcks.OnCoalescedAck(now, a.EchoEV, ce, a.CleanEVs[:a.NumClean], rtt)
	} else if p.Flags&wire.FlagCleanEV != 0 {
		for i := 0; i < int(a.NumClean); i++ {
			c.lb.OnAck(now, a.CleanEVs[i], false, rtt)
		}
		if ce {
			c.lb.OnAck(now, a.EchoEV, true, rtt)
		}
	} else {
		c.lb.OnAck(now, a.EchoEV, ce, rtt)
	}
	// SACK-gap loss detection: a packet is lost once a packet transmitted
	// ReorderThreshold transmissions after it has been acknowledged (the dupACK
	// threshold under recovery "dupack", counted per subflow under "subflows"; none
	// under "gobackn", whose receiver never holds a gap).
	if e.rec == nil || !e.rec.detectLoss(now, c) {
		thr := uint64(e.rthr)
		for {
			t, sp := c.headEntry()
			if sp == nil || t.seq+thr > c.maxAckedSeq {
				break
			}
			e.declareLost(now, c, t.psn, cc.LossSack)
		}
	}
	e.completeMsgs(c)
	e.markReady(c)
}

// ACK verdicts.
const (
	ackOK    = iota
	ackStale // too old to act on: dropped whole, harmless
	ackBad   // claims what we never sent: dropped whole, never partly applied
)

// checkAck validates an ACK against what we sent before any of it is applied: an ACK that
// acknowledges a PSN at or beyond sndNxt, reports more stream delivered than we sent, or
// echoes a transmit time we never stamped is bad; one whose cumulative point is more than
// a PSN window behind ours is stale. An honest receiver only ever reports PSNs it got.
func (e *Endpoint) checkAck(now int64, c *conn, a *wire.Ack) int {
	if wire.SeqLess(c.sndNxt, a.CumPSN) || !wire.SeqLess(a.AckedPSN, c.sndNxt) ||
		a.Delivered > c.streamNext || a.EchoTxTime > now || a.EchoTxTime < c.createdAt {
		return ackBad
	}
	if a.Sack[0]|a.Sack[1]|a.Sack[2]|a.Sack[3] != 0 && e.sackBeyond(c, a) {
		return ackBad
	}
	if wire.SeqDiff(c.sndUna, a.CumPSN) > int32(e.cfg.PSNWindow) {
		return ackStale
	}
	return ackOK
}

// sackBeyond reports whether a's SACK bitmap has bits at or beyond sndNxt: its first off
// bits lie before sndNxt, so the words below word off/64 need no look, that word's bits
// from off%64 on and every later word must be clear.
func (e *Endpoint) sackBeyond(c *conn, a *wire.Ack) bool {
	off := int64(wire.SeqDiff(c.sndNxt, a.SackBase))
	w := max(off, 0) / 64
	var beyond uint64
	if lo := off - 64*w; lo > 0 && w < int64(a.SackWords) {
		beyond = a.Sack[w] &^ (1<<uint(lo) - 1)
		w++
	}
	for ; w < int64(a.SackWords); w++ {
		beyond |= a.Sack[w]
	}
	return beyond != 0
}

// sackAcked acknowledges the packets a's SACK words name that were in flight or lost,
// returning their bytes and number.
func (e *Endpoint) sackAcked(c *conn, a *wire.Ack) (bytes, pkts int) {
	for w := 0; w < int(a.SackWords); w++ {
		word := a.Sack[w]
		for word != 0 {
			i := uint32(bits.TrailingZeros64(word))
			word &= word - 1
			psn := a.SackBase + uint32(64*w) + i
			// Most SACK bits repeat what earlier ACKs said: test the slot before the call.
			if wire.SeqLEQ(c.sndUna, psn) && wire.SeqLess(psn, c.sndNxt) && c.pkts[psn&c.mask].unacked() {
				if b := e.ackPkt(c, psn, a); b > 0 {
					bytes += b
					pkts++
				}
			}
		}
	}
	return bytes, pkts
}

// ackPkt marks psn acknowledged and returns its size if it was not already.
func (e *Endpoint) ackPkt(c *conn, psn uint32, a *wire.Ack) int {
	sp := &c.pkts[psn&c.mask]
	switch sp.state() {
	case pktInflight:
		c.inflight -= int(sp.size)
	case pktLost:
	default:
		return 0
	}
	if sp.ret() != 0 {
		e.rtsJudge(c, sp, psn, a) // was the return that named it true? (rts.go)
	}
	sp.setState(pktAcked)
	// Which transmission arrived matters for SACK-gap detection: crediting a late
	// original with its retransmission's send position would declare every packet sent
	// in between lost. Only a first transmission, or the ACK's trigger whose echoed
	// timestamp names the latest transmission, is known for sure.
	if sp.tx == 1 || (psn == a.AckedPSN && a.EchoTxTime == sp.sentAt) {
		c.maxAckedSeq = max(c.maxAckedSeq, sp.seq)
		if c.sub != nil {
			j := int(sp.ev) % len(c.sub)
			if f, sseq := &c.sub[j], c.subSeq[psn&c.mask]; int32(sseq-f.maxAcked) > 0 {
				f.maxAcked = sseq
				c.subDirty |= 1 << uint(j)
			}
		}
	}
	m := sp.msg
	m.acked += int(sp.size)
	if m.acked == m.n {
		m.allAcked = true
		m.data = nil
		if e.cfg.Unordered {
			// The receiver delivers a message the moment it is complete.
			e.messageSent(c, m)
		}
	}
	return int(sp.size)
}

// messageSent reports m delivered.
func (e *Endpoint) messageSent(c *conn, m *txMsg) {
	m.done = true
	e.stats.MsgsSent++
	ev := e.events.next()
	ev.Kind, ev.Conn, ev.Peer, ev.MsgID = MessageSent, ConnID(c.id), c.peer, m.id
}

// completeMsgs drops finished messages from the head of the queue. Window slots of a
// finished message may still point at it; they are all acknowledged, and no code path
// dereferences the message of an acknowledged slot, so the struct can be reused.
//
// In order, a message is reported sent only once the receiver's Delivered offset has
// passed it: a complete message held behind a missing predecessor is not yet delivered,
// and would be lost with the connection.
func (e *Endpoint) completeMsgs(c *conn) {
	for c.msgs.len() > 0 {
		m := *c.msgs.peek()
		if !m.done {
			if !m.allAcked || m.end() > c.peerDelivered {
				return
			}
			e.messageSent(c, m)
		}
		e.freeMsg(c.msgs.pop())
		if c.cur > 0 {
			c.cur--
		}
	}
	c.probeAt = 0 // nothing left to confirm
}

// onNack: the receiver saw psn trimmed; resend it now.
func (e *Endpoint) onNack(now int64, c *conn, p *wire.Packet) {
	e.stats.NacksRecv++
	nk := &p.Nack
	if p.Flags&wire.FlagRNR != 0 {
		e.onRNR(now, c, nk)
		return
	}
	if p.Flags&wire.FlagGoBack != 0 {
		e.onGoBackNack(now, c, nk)
		return
	}
	psn := nk.PSN
	if !wire.SeqLess(psn, c.sndNxt) || wire.SeqLess(c.sndNxt, nk.CumPSN) || nk.EchoTxTime > now {
		e.stats.BadAcks++ // names a PSN never sent
		return
	}
	if wire.SeqLess(psn, c.sndUna) {
		e.stats.StaleAcks++
		return
	}
	// Only the transmission it echoes may be declared lost: a NACK of an earlier one
	// (already resent) is stale, and a forger would have to guess the timestamp.
	if sp := &c.pkts[psn&c.mask]; sp.state() != pktInflight || sp.sentAt != nk.EchoTxTime {
		e.stats.StaleAcks++
		return
	}
	e.declareLost(now, c, psn, cc.LossTrim)
}

// onProbe answers a flow-control probe with an ACK.
func (e *Endpoint) onProbe(now int64, c *conn, p *wire.Packet, m *RxMeta) {
	if !c.rxInit {
		return // we hold no receive state yet: the peer's data will establish it
	}
	c.probeEcho = p.Probe
	c.probeEV = p.EV
	c.ackNow = true
	e.regrant(now, c)
	e.markReady(c)
}

func (e *Endpoint) onClose(now int64, c *conn) {
	c.peerClosed = true
	e.markReady(c)
}

func (e *Endpoint) onCloseAck(now int64, c *conn) {
	if c.closeReq && c.closeTries > 0 {
		e.remove(now, c, nil)
	}
}
