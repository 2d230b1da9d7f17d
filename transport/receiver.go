package transport

import (
	"net/netip"
	"unsafe"

	"github.com/smartt-transport/smartt/ackpath"
	"github.com/smartt-transport/smartt/transport/wire"
)

// onData places a data packet and schedules its ACK (or NACK, when it was trimmed).
//
// Nothing a peer sends makes us hold more than it delivered: a message's buffer is
// allocated as its data arrives (RecvChunk at a time), the messages a connection has open
// may claim at most RecvWindow bytes of stream besides the next one in delivery order, and
// all buffers together stay within RecvBudget. A packet refused for any of these reasons
// is not recorded, so it is not acknowledged and its sender resends it later.
func (e *Endpoint) onData(now int64, c *conn, p *wire.Packet, m *RxMeta) {
	d := &p.Data
	e.stats.DataRecv++
	if p.Flags&wire.FlagINT != 0 {
		c.rxINT = p.INT // echoed by the next ACK (buildAck)
	}
	ce := m.ECN == CE
	if ce {
		e.stats.CERecv++
	}
	if (!c.rxInit || p.Flags&wire.FlagEC != 0 || wire.SeqLess(c.tracker.Cum(), d.AckFloor)) && !e.rxFloor(c, p) {
		return
	}
	trimmed := p.Trimmed() || (e.cfg.TrimDSCP != 0 && m.DSCP == e.cfg.TrimDSCP)
	if e.rec != nil && e.rec.rxData(now, c, d, p.EV, trimmed, ce, m.RxTime) {
		return
	}
	if trimmed {
		e.onTrimmedData(now, c, p, m, ce)
		return
	}
	if int(d.MsgLen) > e.cfg.MaxMessage || len(p.Payload) > wire.MaxPayload {
		e.stats.ProtoViolations++
		return
	}
	r, done, claim, ok := c.continues(d), false, uint64(0), true
	if r == nil {
		if r, done, claim, ok = e.rxLookup(c, d); !ok {
			return
		}
	}
	if p.Flags&wire.FlagEC != 0 {
		e.onParity(now, c, p, m, r, done, claim, ce)
		return
	}
	switch c.tracker.Check(d.PSN) {
	case ackpath.Beyond:
		e.stats.BeyondWindow++
		return
	case ackpath.Duplicate:
		e.stats.DupData++
		c.trig = trigger{psn: d.PSN, ev: p.EV, ce: ce, txTime: d.TxTime, rxTime: m.RxTime}
		c.coal.OnData(now, ce, p.EV, true)
		e.markReady(c)
		return
	}
	if done {
		// New PSN for a delivered message: the peer resent data under a fresh PSN.
		e.stats.DupData++
	} else if r == nil || !e.appendData(c, p, r) {
		if r, ok = e.placeData(now, c, p, m, r, claim, ce); !ok {
			return
		}
	}
	e.ackData(now, c, p, m, r, done, ce)
}

// continues returns the message c last wrote to if d is more of it, consistent with it
// (what rxLookup finds and checks for such a packet: open, not delivered, same length
// and stream start), else nil: then rxLookup decides.
func (c *conn) continues(d *wire.Data) *rxMsg {
	if r := c.lastRx; r != nil && r.id == d.MsgID && r.n == int(d.MsgLen) && r.streamStart == d.StreamStart &&
		c.doneOOO == nil && !wire.SeqLess(d.MsgID, c.nextDeliver) {
		return r
	}
	return nil
}

// rxFloor sets up c's PSN tracker at its first data packet, or checks p's AckFloor
// against it; false: p is dropped. onData calls it only for a first packet, parity or a
// floor past the cumulative point: the per-packet case passes, tested inline there.
func (e *Endpoint) rxFloor(c *conn, p *wire.Packet) bool {
	switch {
	case p.Flags&wire.FlagEC != 0 && !c.rxInit:
		e.stats.ParityRefused++ // its AckFloor is its block's checksum (ec.go); no data yet
		return false
	case !c.rxInit:
		c.tracker = ackpath.NewTracker(e.cfg.PSNWindow, p.Data.AckFloor)
		c.rxInit = true
	case p.Flags&wire.FlagEC == 0 && wire.SeqLess(c.tracker.Cum(), p.Data.AckFloor):
		// Every PSN below an honest sender's floor was acknowledged by us, so the floor
		// can never pass our cumulative point: obeying it would skip PSNs we never got.
		e.stats.ProtoViolations++
		return false
	}
	return true
}

// onTrimmedData NACKs a trimmed data packet (its payload was cut on the way), unless we
// hold it or the recovery mode takes the NACK.
func (e *Endpoint) onTrimmedData(now int64, c *conn, p *wire.Packet, m *RxMeta, ce bool) {
	d := &p.Data
	e.stats.Trimmed++
	if p.Flags&wire.FlagEC != 0 {
		// Parity is never resent, but its loss may leave its block beyond repair:
		// then the block's trimmed data is NACKed now.
		e.stats.ParityDropped++
		if e.ec != nil {
			e.ecTrimmedParity(c, d)
		}
		return
	}
	if c.tracker.Has(d.PSN) {
		return // a trimmed copy of a packet we already hold
	}
	nk := nackEntry{psn: d.PSN, ev: p.EV, ce: ce, txTime: d.TxTime, rxTime: m.RxTime}
	if e.rec != nil && e.rec.trimNack(c, d, p.Flags&wire.FlagRetx != 0, nk) {
		return // the mode holds it (ec: until the block's parity shows it cannot rebuild)
	}
	if c.nacks.len() < maxNacks {
		c.nacks.push(nk)
	}
	e.pullRequest(now, c, int(d.PayloadLen), 0, false) // EQDS: the header asks for its resend's credit
	e.markReady(c)
}

// rxLookup finds d's message and checks d against what we know of it before the PSN is
// recorded, so that a packet we refuse is not acknowledged: r is nil for a message not
// yet open, done is true for one already delivered, claim is the stream a new message
// claims. ok false: d is refused (counted).
func (e *Endpoint) rxLookup(c *conn, d *wire.Data) (r *rxMsg, done bool, claim uint64, ok bool) {
	r = c.lastRx
	if r == nil || r.id != d.MsgID {
		r = c.rx.get(d.MsgID)
	}
	done = wire.SeqLess(d.MsgID, c.nextDeliver)
	if !done && c.doneOOO != nil {
		_, done = c.doneOOO[d.MsgID]
	}
	switch {
	case done:
		// A message already delivered: only a duplicate can still carry it.
	case r != nil:
		if r.n != int(d.MsgLen) || r.streamStart != d.StreamStart {
			e.stats.ProtoViolations++
			return r, done, 0, false
		}
	default:
		if d.StreamStart < c.delivered {
			e.stats.ProtoViolations++
			return r, done, 0, false
		}
		claim = streamLen(int(d.MsgLen))
		if !c.isHead(d.MsgID, d.StreamStart) && !c.fits(d.StreamStart, claim, uint64(e.cfg.RecvWindow)) {
			e.stats.BeyondWindow++ // the peer ignored our flow control
			return r, done, 0, false
		}
	}
	return r, done, claim, true
}

// placeData stores the new bytes of p (a PSN not seen before, of message r, nil if not
// open yet) within the receive budget and returns the message; ok false: p was refused
// or its bytes were already held (then its ACK is scheduled here).
func (e *Endpoint) placeData(now int64, c *conn, p *wire.Packet, m *RxMeta, r *rxMsg, claim uint64, ce bool) (*rxMsg, bool) {
	d := &p.Data
	got := 0
	if r != nil {
		got = r.got
	}
	if uint64(d.Offset) >= uint64(got)+e.reach(int(d.PayloadLen)) {
		// No honest sender sends this far ahead of what arrived of a message: its
		// PSN window would not let it. Refusing it bounds a message's chunk table.
		e.stats.BeyondWindow++
		return r, false
	}
	fresh := r == nil
	at := 0
	if !fresh {
		var ok bool
		if at, ok = e.rxSpan(now, c, p, m, r, ce); !ok {
			return r, false
		}
	}
	if d.Offset == 0 && e.hooks.Gate != nil && e.gateRefuses(c, p, m, ce) {
		return r, false // receiver not ready: the sender resends it after a back-off
	}
	if fresh {
		r = e.allocRx() // zero but for the arrays it keeps (freeRx)
		r.id, r.n, r.streamStart = d.MsgID, int(d.MsgLen), d.StreamStart
	}
	if !e.reserve(c, r, int(d.Offset), len(p.Payload)) {
		e.stats.RecvBudgetDrops++
		if fresh {
			e.release(c, r) // what reserve did get before it ran out
			e.freeRx(r)
		}
		if !c.proven {
			// Acknowledge nothing, but tell the peer our ID: once it echoes it, it
			// is proven and draws on the whole budget.
			c.trig = trigger{psn: d.PSN, ev: p.EV, ce: ce, txTime: d.TxTime, rxTime: m.RxTime}
			c.ackNow = true
			e.markReady(c)
		}
		return r, false
	}
	if fresh {
		c.rx.put(r)
		c.claimed += claim
	}
	c.lastRx = r
	if d.Offset == 0 && !r.placeTried && e.hooks.Placer != nil {
		e.place(c, r, p.Payload)
	}
	r.write(int(d.Offset), p.Payload)
	if fresh { // its first range: nothing to join or move (addSpan)
		r.spans = append(r.spans, span{d.Offset, d.Offset + uint32(len(p.Payload))})
		r.got = len(p.Payload)
	} else {
		r.addSpan(at, int(d.Offset), len(p.Payload))
	}
	c.bytesRecv += uint64(len(p.Payload))
	if e.rec != nil {
		e.rec.rxPlaced(r, d)
	}
	return r, true
}

// extendsLast reports whether bytes from off on continue the last range r holds: the
// next packet of a message arriving in order.
func (r *rxMsg) extendsLast(off uint32) bool {
	k := len(r.spans)
	return k > 0 && r.spans[k-1].hi == off
}

// reserved reports whether r holds buffer memory for bytes [off, off+n) already: its
// whole buffer, or the chunks they fall in (reserved and charged by earlier packets).
func (r *rxMsg) reserved(off, n int) bool {
	if r.buf != nil {
		return true
	}
	j := (off + max(n, 1) - 1) / RecvChunk
	if j >= len(r.chunks) {
		return false
	}
	for i := off / RecvChunk; i <= j; i++ { // a payload may span several chunks
		if r.chunks[i] == nil {
			return false
		}
	}
	return true
}

// appendData is placeData for the next packet of open message r arriving in order (its
// bytes continue r's last range, within reach) into memory r holds already (reserved):
// the bytes join the last range (what cover and addSpan find for them), there is nothing
// to reserve or charge, and the hooks of a message's first packet (Gate, Placer) do not
// apply. False: p is not such a packet, and placeData takes it (onData tries this first).
func (e *Endpoint) appendData(c *conn, p *wire.Packet, r *rxMsg) bool {
	d := &p.Data
	n := len(p.Payload)
	if uint64(d.Offset) >= uint64(r.got)+e.reach(int(d.PayloadLen)) || !r.extendsLast(d.Offset) || !r.reserved(int(d.Offset), n) {
		return false
	}
	r.write(int(d.Offset), p.Payload)
	r.spans[len(r.spans)-1].hi = d.Offset + uint32(n)
	r.got += n
	c.lastRx = r
	c.bytesRecv += uint64(n)
	if e.rec != nil {
		e.rec.rxPlaced(r, d)
	}
	return true
}

// rxSpan checks p's bytes against what open message r holds and returns where its span
// goes (coverage.go); ok false: refused, or held already (then p's PSN is acknowledged).
func (e *Endpoint) rxSpan(now int64, c *conn, p *wire.Packet, m *RxMeta, r *rxMsg, ce bool) (int, bool) {
	d := &p.Data
	at, kind := r.cover(int(d.Offset), len(p.Payload))
	switch kind {
	case coverDup:
		// Bytes we hold under a fresh PSN (a spurious retransmission whose
		// original arrived too): acknowledge the PSN, keep the bytes once.
		e.stats.DupData++
		oldCum := c.tracker.Cum()
		c.tracker.Mark(d.PSN)
		urgent := e.cfg.Ack.Urgent(d.PSN, oldCum, c.tracker.Cum(), ce, p.Flags&wire.FlagAckReq != 0, false, e.rthr)
		c.trig = trigger{psn: d.PSN, ev: p.EV, ce: ce, txTime: d.TxTime, rxTime: m.RxTime}
		c.coal.OnData(now, ce, p.EV, urgent)
		e.markReady(c)
		return at, false
	case coverOverlap:
		e.stats.ProtoViolations++ // an honest sender resends whole packets
		return at, false
	case coverFull:
		e.stats.BeyondWindow++ // resent later, when holes have closed
		return at, false
	}
	if !e.spanRoom(c, r, at, int(d.Offset), len(p.Payload)) {
		e.stats.RecvBudgetDrops++
		return at, false
	}
	return at, true
}

// ackData records p's PSN, completes its message (r, nil for a delivered one: done) and
// schedules the ACK: held for outgoing data when it completed a one-packet message
// (holdable), else through the coalescer.
func (e *Endpoint) ackData(now int64, c *conn, p *wire.Packet, m *RxMeta, r *rxMsg, done, ce bool) {
	d := &p.Data
	oldCum := c.tracker.Cum()
	c.tracker.Mark(d.PSN)
	if !done {
		// EQDS: an arrival asks for its replacement (a duplicate does not: its sender
		// judged the original lost and got that credit back).
		e.pullRequest(now, c, int(d.PayloadLen), m.RxTime-d.TxTime, true)
	}
	rebuilt := r != nil && !done && len(r.ec) > 0 && e.ecTryAt(c, r, int(d.Offset)) > 0
	complete := r != nil && !done && r.got == r.n
	if complete {
		e.complete(c, r)
	}
	c.trig = trigger{psn: d.PSN, ev: p.EV, ce: ce, txTime: d.TxTime, rxTime: m.RxTime}
	if complete && e.holdable(c, p, oldCum, ce, rebuilt) {
		// The message's ACK waits for our answer (ack.complete_delay): its ACK request
		// and the completion are what would force it, and they are why it is held.
		e.stats.AcksHeld++
		c.coal.Hold(now, ce, p.EV, len(p.Payload))
		e.holdAck(c)
	} else {
		urgent := e.cfg.Ack.Urgent(d.PSN, oldCum, c.tracker.Cum(), ce, p.Flags&wire.FlagAckReq != 0 || rebuilt, complete, e.rthr)
		c.coal.OnDataBytes(now, ce, p.EV, len(p.Payload), urgent)
	}
	e.markReady(c)
}

// holdable reports whether the ACK of p, which completed a message, may wait for an
// outgoing data packet to the peer (ack.complete_delay): only for a message of one packet
// sent once (a bulk message's last ACK held would add the hold to its sender's completion
// time, and a retransmission's sender is already waiting), and only when nothing else
// about the packet asks for an ACK at once (a CE mark under on_ce, a filled hole, a hole
// past the reorder threshold, a block rebuilt from parity). After an unanswered hold it
// counts down c's completions to ACK at once instead (holdBackoff).
func (e *Endpoint) holdable(c *conn, p *wire.Packet, oldCum uint32, ce, rebuilt bool) bool {
	d := &p.Data
	if e.cfg.Ack.CompleteDelay <= 0 || rebuilt || d.Offset != 0 || int(d.MsgLen) != len(p.Payload) ||
		p.Flags&wire.FlagRetx != 0 || e.cfg.Ack.Urgent(d.PSN, oldCum, c.tracker.Cum(), ce, false, false, e.rthr) {
		return false
	}
	if c.holdSkip > 0 {
		c.holdSkip--
		return false
	}
	return true
}

// holdAck lists c among the connections whose ACK is held for outgoing data
// (releaseHeld). Entries whose hold ended are dropped lazily, when the list is scanned
// or before it would grow, so the list stays near the number of holds at once.
func (e *Endpoint) holdAck(c *conn) {
	if c.inHeld {
		return
	}
	if len(e.heldAcks) == cap(e.heldAcks) {
		e.releaseHeld(netip.AddrPort{}, 0) // compacts; no connection has the zero peer
	}
	c.inHeld = true
	e.heldAcks = append(e.heldAcks, c)
}

// rideHeld is called when c is about to send a data packet of size bytes (a
// retransmission if retx) into buf: if ACKs are held for c's peer, they go first, on the
// EV the data packet will take (picked now). One of them goes in the same datagram when
// the packet is small enough (bundleHeld): rideHeld returns its length, and the data
// packet goes into buf after it. Otherwise it returns 0 when none is held and -1 when it
// released some to go as packets of their own (c must yield: it is queued again behind
// them).
func (e *Endpoint) rideHeld(now int64, c *conn, size int, retx bool, buf []byte) int {
	if !c.evPicked || c.pickedRetx != retx {
		c.pickedEV, c.pickedRetx, c.evPicked = c.nextEV(now, size, retx), retx, true
	}
	if n := e.bundleHeld(now, c, size, buf); n > 0 {
		e.releaseHeld(c.peer, c.pickedEV) // any others ride behind, in the same batch
		return n
	}
	if !e.releaseHeld(c.peer, c.pickedEV) {
		return 0
	}
	e.markReady(c)
	return -1
}

// bundleMaxPayload bounds the data packet a held ACK rides inside (a bundle): a bundle
// leads with an ACK, so switches see a control packet they neither trim nor, by its
// type, tell from one; bundles stay the size of an answer, not of bulk data.
const bundleMaxPayload = 1024

// bundleHeld writes the held ACK of a connection to c's peer into buf, flagged as leading
// a bundle, when c's next data packet (of size payload bytes) can follow it in the same
// datagram: no authentication (a seal covers one packet), the packet at most
// bundleMaxPayload and both within one MTU. It returns the ACK's length, or 0.
func (e *Endpoint) bundleHeld(now int64, c *conn, size int, buf []byte) int {
	if e.auth != nil || size > bundleMaxPayload {
		return 0
	}
	for _, h := range e.heldAcks {
		if h.dead || !h.coal.Held() || h.peer != c.peer || !h.rxInit || h.peerID == 0 {
			continue
		}
		if size+wire.MaxAckLen > e.cfg.MTU {
			return 0
		}
		h.ackRide, h.rideEV = true, c.pickedEV
		var t Transmit
		if !e.buildAck(now, h, buf, &t) {
			return 0
		}
		buf[1] |= byte(wire.FlagBundle)
		h.lastActive, h.echoed = now, true
		e.touch(h, now)
		e.stats.BundlesSent++
		e.stats.PacketsSent++ // the ACK; PollTransmit counts the datagram's data packet
		return t.N
	}
	return 0
}

// bundled is the transmit of data packet t with a bundled ACK of lead bytes ahead of it
// in the buffer (bundleHeld): one datagram that starts with the ACK, sent as data.
func (e *Endpoint) bundled(lead int, t *Transmit) {
	if lead > 0 {
		t.N += lead
		t.Type = wire.TypeAck // the datagram's first packet, which test networks look at
	}
}

// releaseHeld lets the held ACKs of every connection to peer leave now: they are marked
// to go at the connection's next transmit, on EV ev, ahead of the data packet to peer
// that is about to go on ev, so the driver sends them in one batch (one system call: the
// same EV is the same socket) and the peer reads them in one wake-up, the ACK first (its
// Sent then rides in front of the answer). It reports whether there were any, and drops
// entries whose hold ended.
func (e *Endpoint) releaseHeld(peer netip.AddrPort, ev uint16) bool {
	k, found := 0, false
	for _, h := range e.heldAcks {
		switch {
		case h.dead || !h.coal.Held():
			h.inHeld = false
		case h.peer == peer:
			h.inHeld, h.ackRide, h.rideEV = false, true, ev
			e.markReady(h)
			found = true
		default:
			e.heldAcks[k] = h
			k++
		}
	}
	clear(e.heldAcks[k:])
	e.heldAcks = e.heldAcks[:k]
	return found
}

const maxNacks = 1024

// reach bounds how far beyond the bytes received of a message a packet's offset can lie:
// an honest sender sends a packet only while it is within PSNWindow PSNs of its oldest
// unacknowledged one, and the receiver's lowest missing byte of the message is such a
// packet, so offset < received + PSNWindow x packet size.
func (e *Endpoint) reach(payload int) uint64 {
	return uint64(e.cfg.PSNWindow) * uint64(max(e.cfg.MTU, payload))
}

// isHead reports whether a message is the next in delivery order, the one flow control
// always admits whole (so a message larger than the window cannot deadlock).
func (c *conn) isHead(id uint32, streamStart uint64) bool {
	return id == c.nextDeliver && streamStart == c.delivered
}

// fits applies flow control to a new message claiming claim bytes of stream from start:
// it must end within the window, and with the other open messages (the head excepted)
// claim at most the window in total, so that overlapping claims cannot multiply it.
func (c *conn) fits(start, claim, window uint64) bool {
	// start >= c.delivered (onData checked it); written without sums, which would wrap
	// for a StreamStart near 2^64 and let such a message pass.
	if d := start - c.delivered; d > window || claim > window-d {
		return false
	}
	other := c.claimed
	if h := c.rx.get(c.nextDeliver); h != nil && h.streamStart == c.delivered {
		other -= streamLen(h.n)
	}
	return other+claim <= window
}

// chunked reports whether r's buffer is allocated RecvChunk at a time.
func (e *Endpoint) chunked(r *rxMsg) bool {
	return (r.n > RecvChunk || e.hooks.DeliverChunks) && !e.wholeBufs && !r.whole
}

// Whole buffers for proven peers: a message from a peer that has proven its address,
// delivered in one buffer (no DeliverChunks), takes that buffer from Hooks.Buffers,
// charged whole, once what is still to arrive of it is at most wholeMax plus the peer's
// credit (recvState.wholeCredit), while what the endpoint holds stays within
// RecvBudget/wholeShare: its data is then written once, not copied again from chunks at
// delivery. Beyond that share (a proven peer opening many messages with a packet each)
// messages are chunked, holding only what arrived. wholeMax keeps what one packet can
// make us hold to one message's granule (docs/security.md); the credit is what the peer
// delivered in complete messages on this connection (at most wholeCreditMax) less what
// earlier buffers lent it: a peer pays for what we buffer ahead of its data, before or
// after, and one that opens large messages and never finishes them holds at most a
// granule each plus what it delivered before.
const (
	wholeMax       = 256 << 10
	wholeShare     = 4
	wholeCreditMax = 4 << 20
)

// wholeNow moves chunked message r into one buffer, charged whole (the rules above): at
// its first packet (r holds nothing yet), or later, when what arrived is copied over from
// its chunks. It spends the credit the buffer needs beyond wholeMax; true: r is whole.
func (e *Endpoint) wholeNow(c *conn, r *rxMsg) bool {
	if !c.proven || e.hooks.DeliverChunks || r.place != nil || (r.held != 0 && r.got == 0) {
		return false
	}
	var lend uint64
	if ahead := uint64(r.n - r.got); ahead > wholeMax {
		// A Placer may want a large message: the credit is not spent ahead of it.
		if lend = ahead - wholeMax; lend > c.wholeCredit || e.hooks.Placer != nil {
			return false
		}
	}
	var chunked uint64
	for _, ch := range r.chunks {
		chunked += uint64(cap(ch))
	}
	add := uint64(r.n) - chunked
	if r.held == 0 {
		add += msgRecBytes // a new message's record (charge)
	}
	if chunked > uint64(r.n) || e.stats.RecvBuffered+add > uint64(e.cfg.RecvBudget)/wholeShare ||
		!e.charge(c, r, uint64(r.n)-chunked) {
		return false
	}
	c.wholeCredit -= lend
	r.buf = e.hooks.Buffers.Get(r.n)
	for i, ch := range r.chunks {
		if ch != nil {
			copy(r.buf[i*RecvChunk:], ch)
			e.putChunk(ch)
		}
	}
	clear(r.chunks)
	r.chunks = r.chunks[:0] // its capacity stays charged until freeRx
	r.whole = true
	return true
}

// reserve makes sure r has buffer memory for bytes [off, off+n), within RecvBudget.
func (e *Endpoint) reserve(c *conn, r *rxMsg, off, n int) bool {
	if !e.chunked(r) || e.wholeNow(c, r) {
		if r.buf != nil {
			return true
		}
		if !e.charge(c, r, uint64(r.n)) {
			return false
		}
		r.buf = e.hooks.Buffers.Get(r.n)
		return true
	}
	last := (off + max(n, 1) - 1) / RecvChunk
	if last >= len(r.chunks) && !e.growTable(c, r, last+1) {
		return false
	}
	for i := off / RecvChunk; i <= last; i++ {
		if r.chunks[i] != nil {
			continue
		}
		size := min(RecvChunk, r.n-i*RecvChunk)
		if r.place != nil {
			if !e.charge(c, r, uint64(size)) {
				return false
			}
			lo := i * RecvChunk
			r.chunks[i] = r.place[lo : lo+size : lo+size] // never put back in the pool
			continue
		}
		if !e.charge(c, r, bufCap(size)) { // what the chunk holds: its class's size
			return false
		}
		r.chunks[i] = e.getChunk(size)
	}
	return true
}

// growTable makes r's chunk table n slots long. The table grows with the data (offsets
// are bounded by the reach rule in onData), so a 65-byte packet claiming 1 GiB costs one
// slot, not 16,384; it is charged at its capacity beyond the tableKeep slots of the
// message's record, and at least doubles when it grows, so that growing costs O(1) per slot.
func (e *Endpoint) growTable(c *conn, r *rxMsg, n int) bool {
	if n <= cap(r.chunks) {
		r.chunks = r.chunks[:n]
		return true
	}
	if cap(r.chunks) == 0 && n <= tableKeep {
		r.chunks = getTable(n) // within the record's charge (the table went with a delivery)
		return true
	}
	want := max(n, 2*cap(r.chunks))
	if want > tableKeep && !e.charge(c, r, uint64(want-max(cap(r.chunks), tableKeep))*chunkSlotBytes) {
		return false
	}
	t := make([][]byte, n, want)
	copy(t, r.chunks)
	clear(r.chunks)
	putTable(r.chunks)
	r.chunks = t
	return true
}

// spanRoom makes room in r's span list for the range [off, off+n) that cover placed at
// index i, if it needs a new entry: beyond the spanKeep entries of the message's record
// the list is charged at its capacity (it doubles, up to maxSpans).
func (e *Endpoint) spanRoom(c *conn, r *rxMsg, i, off, n int) bool {
	s := r.spans
	if len(s) < cap(s) || len(s) < spanKeep ||
		(i > 0 && int(s[i-1].hi) == off) || (i < len(s) && int(s[i].lo) == off+n) {
		return true // joins a neighbour, or fits the list's spare room or the record's
	}
	want := min(max(2*cap(s), spanKeep), maxSpans)
	if !e.charge(c, r, uint64(want-max(cap(s), spanKeep))*spanBytes) {
		return false
	}
	t := make([]span, len(s), want)
	copy(t, s)
	r.spans = t
	return true
}

// The ledger of an open message (charge): its record, its chunk table and span list at
// capacity, and each buffer at what it holds.
const (
	// chunkSlotBytes is what one entry of a message's chunk table costs (a slice header).
	chunkSlotBytes = 24
	// spanBytes is what one entry of a message's span list costs.
	spanBytes = uint64(unsafe.Sizeof(span{}))
	// tableKeep and spanKeep are the chunk-table slots and span entries a message's record
	// includes (and that a recycled record keeps).
	tableKeep = 4
	spanKeep  = 16
	// mapEntryBytes is an open message's share of its connection's map, at worst (a
	// map doubles when it grows: up to 8 slots of 16 bytes plus control bytes per 7
	// entries, times 2). The map is rebuilt when it shrinks (shrinkRx).
	mapEntryBytes = 48
	// msgRecBytes is the fixed charge of an open message: its record (rxMsg, rounded up
	// to the allocator's 16 bytes), its map entry, tableKeep slots and spanKeep spans.
	msgRecBytes = (uint64(unsafe.Sizeof(rxMsg{}))+15)&^15 + mapEntryBytes + tableKeep*chunkSlotBytes + spanKeep*spanBytes
	// oooEntryBytes is the charge of a message delivered out of order (Unordered) whose
	// stream space stays claimed (conn.doneOOO): its map entry, at worst.
	oooEntryBytes = 64
)

// charge accounts n more bytes held for r if the budget allows it. Beyond the budget, one
// message at a time, the next in its connection's delivery order (any message, unordered),
// of a proven peer may go on (it is delivered, and frees its memory and that of the
// complete messages waiting behind it, the moment it is complete), so a full budget cannot
// deadlock: RecvBuffered <= RecvBudget + maxMsgCharge(MaxMessage). Unproven peers
// (possibly spoofed) share only RecvBudget/unprovenShare.
func (e *Endpoint) charge(c *conn, r *rxMsg, n uint64) bool {
	if r.held == 0 {
		// A message's first charge pays for its record, which its connection's map is
		// about to hold (shrinkRx).
		n += msgRecBytes
		c.rxPeak = max(c.rxPeak, c.rx.len()+1)
	}
	budget := uint64(e.cfg.RecvBudget)
	over := e.stats.RecvBuffered+n > budget
	if !c.proven {
		if over || e.unprovenHeld+n > budget/unprovenShare {
			return false
		}
		e.unprovenHeld += n
	} else if over && e.exempt != r {
		if e.exempt != nil || !(e.cfg.Unordered || c.isHead(r.id, r.streamStart)) {
			return false
		}
		e.exempt = r
	}
	r.held += n
	c.held += n
	e.stats.RecvBuffered += n
	e.stats.RecvBufferedMax = max(e.stats.RecvBufferedMax, e.stats.RecvBuffered)
	return true
}

// maxMsgCharge is the most one message of n bytes can be charged: its buffers at
// capacity, its record, a chunk table of twice its chunks and a full span list (and under
// recovery "ec" parity for maxECBlocks blocks). The message charge exempts from the budget
// is one of at most MaxMessage bytes, so RecvBuffered <= RecvBudget + this for MaxMessage.
func (c *Config) maxMsgCharge(n int) uint64 {
	chunks := (n + RecvChunk - 1) / RecvChunk
	held := uint64(n/RecvChunk) * RecvChunk
	if r := n % RecvChunk; r > 0 {
		held += bufCap(r)
	}
	held += msgRecBytes + uint64(max(2*chunks-tableKeep, 0))*chunkSlotBytes + (maxSpans-spanKeep)*spanBytes
	if c.Recovery.mode() == RecoveryEC {
		_, m := c.ECBlock()
		held += maxECBlocks * (uint64(m)*uint64(max(c.MTU, 4096)) + ecBlockBytes) // ecCodec.get's buffers
	}
	return held
}

// unprovenShare: connections whose peer has not proven its address hold at most
// RecvBudget/unprovenShare bytes together, so a spoofed flood cannot take the budget.
const unprovenShare = 8

// prove marks c's peer as having proven its address: its buffers move to the proven share.
func (e *Endpoint) prove(c *conn) {
	c.proven = true
	e.unproven.remove(c)
	e.unprovenHeld -= c.held
}

// unheld returns r's buffer bytes to the budget.
func (e *Endpoint) unheld(c *conn, r *rxMsg) {
	e.stats.RecvBuffered -= r.held
	c.held -= r.held
	if !c.proven {
		e.unprovenHeld -= r.held
	}
	r.held = 0
	if e.exempt == r {
		e.exempt = nil
	}
}

// write copies a payload to offset off of r (reserve has made room).
func (r *rxMsg) write(off int, b []byte) {
	if len(r.chunks) == 0 {
		copy(r.buf[off:], b)
		return
	}
	for len(b) > 0 {
		i, o := off/RecvChunk, off%RecvChunk
		k := copy(r.chunks[i][o:], b)
		off += k
		b = b[k:]
	}
}

// complete handles a fully received message: deliver it now (unordered, or it is next in
// line) or keep it until the messages before it are delivered.
func (e *Endpoint) complete(c *conn, r *rxMsg) {
	if c.lastRx == r {
		c.lastRx = nil
	}
	if e.cfg.Unordered {
		id, end, claim := r.id, r.streamStart+streamLen(r.n), streamLen(r.n)
		e.deliver(c, r)
		if id != c.nextDeliver {
			if c.doneOOO == nil {
				c.doneOOO = make(map[uint32]oooMsg)
			}
			c.doneOOO[id] = oooMsg{end: end, claim: claim} // still claims its stream space
			// Charged whatever the budget: delivering the message released more.
			e.chargeConn(c, oooEntryBytes)
			c.oooPeak = max(c.oooPeak, len(c.doneOOO))
			return
		}
		c.nextDeliver++
		c.delivered = end
		c.claimed -= claim
		for {
			o, ok := c.doneOOO[c.nextDeliver]
			if !ok {
				return
			}
			delete(c.doneOOO, c.nextDeliver)
			e.chargeConn(c, -oooEntryBytes)
			c.nextDeliver++
			c.delivered = o.end
			c.claimed -= o.claim
			c.shrinkOOO()
		}
	}
	for r != nil && r.id == c.nextDeliver && r.got == r.n {
		end, claim := r.streamStart+streamLen(r.n), streamLen(r.n)
		e.deliver(c, r)
		c.nextDeliver++
		c.delivered = end
		c.claimed -= claim
		r = c.rx.get(c.nextDeliver)
	}
}

// oooMsg is a message delivered ahead of its predecessors (Unordered): its stream space
// stays claimed until the delivered point passes it.
type oooMsg struct{ end, claim uint64 }

// deliver hands r's data to the application and recycles r. A chunked message is handed
// over in its chunks (DeliverChunks) or assembled into one buffer here: the copy is the
// price of holding only what arrived.
func (e *Endpoint) deliver(c *conn, r *rxMsg) {
	c.rx.del(r.id)
	c.shrinkRx()
	buf := r.buf
	var chunks [][]byte
	if r.place != nil {
		buf = r.place // the chunks are slices of it: nothing to assemble or give back
		clear(r.chunks)
	} else if e.hooks.DeliverChunks && len(r.chunks) > 0 {
		chunks, r.chunks = r.chunks, nil // the table goes with them
	} else if len(r.chunks) > 0 {
		buf = e.hooks.Buffers.Get(r.n)
		off := 0
		for _, ch := range r.chunks {
			off += copy(buf[off:], ch)
			e.putChunk(ch)
		}
	}
	e.unheld(c, r)
	c.deliveredAny = true
	c.wholeCredit = min(c.wholeCredit+uint64(r.n), wholeCreditMax) // paid for in full (wholeNow)
	e.stats.MsgsDelivered++
	e.stats.BytesDelivered += uint64(r.n)
	ev := e.events.next() // filled in place: an Event is 120 bytes
	ev.Kind, ev.Conn, ev.Peer, ev.MsgID = MessageReceived, ConnID(c.id), c.peer, r.id
	ev.Data, ev.Chunks, ev.Placed = buf, chunks, r.placeTok
	e.freeRx(r)
}

// chargeConn adds n (negative: returns) to what c holds outside its messages' records
// (conn.oooHeld), whatever the budget; the caller bounds it.
func (e *Endpoint) chargeConn(c *conn, n int64) {
	u := uint64(n)
	c.oooHeld += u
	c.held += u
	e.stats.RecvBuffered += u
	if !c.proven {
		e.unprovenHeld += u
	}
	e.stats.RecvBufferedMax = max(e.stats.RecvBufferedMax, e.stats.RecvBuffered)
}

// shrinkRx rebuilds c's map of open messages once it holds under a quarter of its
// high-water mark (rxSet.shrink).
func (c *conn) shrinkRx() { c.rxPeak = c.rx.shrink(c.rxPeak) }

// shrinkOOO is shrinkRx for the messages delivered out of order.
func (c *conn) shrinkOOO() {
	if c.oooPeak <= mapShrinkMin || 4*len(c.doneOOO) >= c.oooPeak {
		return
	}
	m := make(map[uint32]oooMsg, len(c.doneOOO))
	for id, o := range c.doneOOO {
		m[id] = o
	}
	c.doneOOO, c.oooPeak = m, len(m)
}

// mapShrinkMin: maps of at most this many entries are not worth rebuilding.
const mapShrinkMin = 64

// allocRx returns a message record: recycled ones are zero but for the chunk table, span
// list and block list arrays freeRx keeps, so a caller sets the rest field by field.
func (e *Endpoint) allocRx() *rxMsg {
	if n := len(e.freeRxs); n > 0 {
		r := e.freeRxs[n-1]
		e.freeRxs = e.freeRxs[:n-1]
		return r
	}
	return new(rxMsg)
}

// freeRx recycles r: at most maxFreeRx records are kept, each with a chunk table and a
// span list no larger than its charge includes (tableKeep, spanKeep).
func (e *Endpoint) freeRx(r *rxMsg) {
	tbl := r.chunks[:0] // keep the chunk table's and span list's arrays for the next message
	clear(r.chunks)
	if cap(tbl) > tableKeep {
		tbl = nil
	}
	spans := r.spans[:0]
	if cap(spans) > spanKeep {
		spans = nil // a hostile peer's 1,024 ranges are not kept for everyone
	}
	var ecb []*ecBlock
	if r.ec != nil {
		e.ecRelease(r)
		ecb = r.ec[:0]
	}
	// Field by field (TestFreeRxZeroes checks every field): assigning a literal costs a
	// whole-record copy, a fifth of a small message's receive path.
	r.id, r.n, r.streamStart, r.got, r.held = 0, 0, 0, 0, 0
	r.spans, r.buf, r.chunks, r.ec, r.place = spans, nil, tbl, ecb, nil
	r.anchor, r.placeTok, r.placeTried, r.whole = ecAnchor{}, 0, false, false
	if len(e.freeRxs) < maxFreeRx {
		e.freeRxs = append(e.freeRxs, r)
	}
}

// maxFreeRx bounds the message records an endpoint keeps for reuse (about 450 KiB).
const maxFreeRx = 1024

// release returns r's buffers to the pool and its bytes to the budget.
func (e *Endpoint) release(c *conn, r *rxMsg) {
	if r.buf != nil {
		e.hooks.Buffers.Put(r.buf)
	}
	if r.place != nil {
		clear(r.chunks) // slices of the Placer's buffer, which gets it back
		e.hooks.Placer.Unplace(r.placeTok)
		r.place, r.placeTok = nil, 0
	}
	for _, ch := range r.chunks {
		if ch != nil {
			e.putChunk(ch)
		}
	}
	e.unheld(c, r)
}

// place offers message r, whose offset-0 packet (payload head) is arriving, to the
// Placer (Hooks.Placer): if it takes it, what arrived so far moves from the engine's
// chunks into the Placer's buffer and the rest is written there, so that delivery hands
// over that buffer with nothing to copy. Only for chunked messages of a peer that has
// proven its address (an unproven one, possibly spoofed, must not reserve the
// application's memory).
func (e *Endpoint) place(c *conn, r *rxMsg, head []byte) {
	r.placeTried = true
	if !c.proven || !e.chunked(r) || r.n < PlaceMin {
		return
	}
	buf, tok := e.hooks.Placer.Place(c.peer, r.n, head)
	if tok == 0 {
		return
	}
	if len(buf) != r.n {
		e.hooks.Placer.Unplace(tok) // a Placer's mistake: keep the chunks
		return
	}
	for i, ch := range r.chunks {
		if ch == nil {
			continue
		}
		lo := i * RecvChunk
		dst := buf[lo : lo+len(ch) : lo+len(ch)]
		copy(dst, ch)
		e.uncharge(c, r, bufCap(len(ch))-uint64(len(ch))) // now charged at its length, as placed chunks are
		e.putChunk(ch)
		r.chunks[i] = dst
	}
	r.place, r.placeTok = buf, tok
	e.stats.MsgsPlaced++
}

// releaseRx returns the buffers of undelivered messages when a connection goes away.
func (c *conn) releaseRx(e *Endpoint) {
	for r := range c.rx.all {
		e.release(c, r)
		c.rx.del(r.id)
		e.freeRx(r)
	}
	e.chargeConn(c, -int64(c.oooHeld))
	c.claimed = 0
	c.lastRx = nil
}

// partial reports whether c holds part of an undelivered message.
func (c *conn) partial() bool { return !c.rx.empty() }
