package transport

import (
	"smartt/ackpath"
	"smartt/transport/wire"
)

// onData places a data packet and schedules its ACK (or NACK, when it was trimmed).
func (e *Endpoint) onData(now int64, c *conn, p *wire.Packet, m *RxMeta) {
	d := &p.Data
	e.stats.DataRecv++
	ce := m.ECN == CE
	if ce {
		e.stats.CERecv++
	}
	if !c.rxInit {
		c.tracker = ackpath.NewTracker(e.cfg.PSNWindow, d.AckFloor)
		c.rxInit = true
	}
	c.tracker.AdvanceTo(d.AckFloor)
	if p.Trimmed() || (e.cfg.TrimDSCP != 0 && m.DSCP == e.cfg.TrimDSCP) {
		e.stats.Trimmed++
		if c.tracker.Has(d.PSN) {
			return // a trimmed copy of a packet we already hold
		}
		if c.nacks.len() < maxNacks {
			c.nacks.push(nackEntry{psn: d.PSN, ev: p.EV, ce: ce, txTime: d.TxTime, rxTime: m.RxTime})
		}
		e.markReady(c)
		return
	}
	if int(d.MsgLen) > e.cfg.MaxMessage || len(p.Payload) > wire.MaxPayload {
		e.stats.ProtoViolations++
		return
	}
	// Find the message, checking it against what we know before the PSN is recorded,
	// so that a packet we refuse is not acknowledged.
	r := c.lastRx
	if r == nil || r.id != d.MsgID {
		r = c.rx[d.MsgID]
	}
	done := wire.SeqLess(d.MsgID, c.nextDeliver)
	if !done && c.doneOOO != nil {
		_, done = c.doneOOO[d.MsgID]
	}
	switch {
	case done:
		// A message already delivered: only a duplicate can still carry it.
	case r != nil:
		if uint32(len(r.buf)) != d.MsgLen || r.streamStart != d.StreamStart {
			e.stats.ProtoViolations++
			return
		}
	default:
		end := d.StreamStart + streamLen(int(d.MsgLen))
		if d.StreamStart < c.delivered {
			e.stats.ProtoViolations++
			return
		}
		if d.StreamStart != c.delivered && end > c.delivered+uint64(e.cfg.RecvWindow) {
			e.stats.BeyondWindow++ // the peer ignored our flow control
			return
		}
	}
	oldCum := c.tracker.Cum()
	switch c.tracker.Mark(d.PSN) {
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
	} else {
		if r == nil {
			r = e.allocRx()
			*r = rxMsg{id: d.MsgID, streamStart: d.StreamStart, buf: e.cfg.Buffers.Get(int(d.MsgLen))}
			c.rx[d.MsgID] = r
			c.buffered += uint64(d.MsgLen)
			e.stats.RecvBuffered += uint64(d.MsgLen)
			if e.stats.RecvBuffered > e.stats.RecvBufferedMax {
				e.stats.RecvBufferedMax = e.stats.RecvBuffered
			}
		}
		c.lastRx = r
		r.got += copy(r.buf[d.Offset:], p.Payload)
	}
	complete := r != nil && !done && r.got == len(r.buf)
	if complete {
		e.complete(c, r)
	}
	urgent := d.PSN != oldCum || p.Flags&wire.FlagAckReq != 0 || complete
	c.trig = trigger{psn: d.PSN, ev: p.EV, ce: ce, txTime: d.TxTime, rxTime: m.RxTime}
	c.coal.OnData(now, ce, p.EV, urgent)
	e.markReady(c)
}

const maxNacks = 1024

// complete handles a fully received message: deliver it now (unordered, or it is next in
// line) or keep it until the messages before it are delivered.
func (e *Endpoint) complete(c *conn, r *rxMsg) {
	if c.lastRx == r {
		c.lastRx = nil
	}
	if e.cfg.Unordered {
		id, end := r.id, r.streamStart+streamLen(len(r.buf))
		e.deliver(c, r)
		if id != c.nextDeliver {
			if c.doneOOO == nil {
				c.doneOOO = make(map[uint32]uint64)
			}
			c.doneOOO[id] = end
			return
		}
		c.nextDeliver++
		c.delivered = end
		for {
			end, ok := c.doneOOO[c.nextDeliver]
			if !ok {
				return
			}
			delete(c.doneOOO, c.nextDeliver)
			c.nextDeliver++
			c.delivered = end
		}
	}
	for r != nil && r.id == c.nextDeliver && r.got == len(r.buf) {
		end := r.streamStart + streamLen(len(r.buf))
		e.deliver(c, r)
		c.nextDeliver++
		c.delivered = end
		r = c.rx[c.nextDeliver]
	}
}

// deliver hands r's buffer to the application and recycles r.
func (e *Endpoint) deliver(c *conn, r *rxMsg) {
	delete(c.rx, r.id)
	n := uint64(len(r.buf))
	c.buffered -= n
	e.stats.RecvBuffered -= n
	e.stats.MsgsDelivered++
	e.stats.BytesDelivered += n
	e.emit(Event{Kind: MessageReceived, Conn: ConnID(c.id), Peer: c.peer, MsgID: r.id, Data: r.buf})
	e.freeRx(r)
}

func (e *Endpoint) allocRx() *rxMsg {
	if n := len(e.freeRxs); n > 0 {
		r := e.freeRxs[n-1]
		e.freeRxs = e.freeRxs[:n-1]
		return r
	}
	return new(rxMsg)
}

func (e *Endpoint) freeRx(r *rxMsg) {
	*r = rxMsg{}
	e.freeRxs = append(e.freeRxs, r)
}

// releaseRx returns the buffers of undelivered messages when a connection goes away.
func (c *conn) releaseRx(e *Endpoint) {
	for id, r := range c.rx {
		e.cfg.Buffers.Put(r.buf)
		e.stats.RecvBuffered -= uint64(len(r.buf))
		delete(c.rx, id)
		e.freeRx(r)
	}
	c.buffered = 0
	c.lastRx = nil
}
