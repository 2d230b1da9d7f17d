package transport

import "math"

// Connection admission and expiry.
//
// A first DATA packet creates a connection without a handshake, so its source address
// may be spoofed. Such a connection is unproven until the peer sends a packet carrying
// the ID we chose (which only our ACKs to its address told it). Unproven connections are
// evicted oldest first when MaxConns is reached, so a flood of spoofed first contacts
// cannot lock out an honest peer, and they are forgotten after UnprovenTimeout without a
// packet. Every connection is forgotten when idle (idleDeadline), so nothing a silent or
// vanished peer left behind stays.

// connList is an intrusive doubly linked list of connections (O(1) insert and remove).
type connList struct {
	head, tail *conn
	n          int // connections listed
}

func (l *connList) pushBack(c *conn) {
	if c.listed {
		return
	}
	c.listed = true
	l.n++
	c.lprev, c.lnext = l.tail, nil
	if l.tail != nil {
		l.tail.lnext = c
	} else {
		l.head = c
	}
	l.tail = c
}

func (l *connList) remove(c *conn) {
	if !c.listed {
		return
	}
	c.listed = false
	l.n--
	if c.lprev != nil {
		c.lprev.lnext = c.lnext
	} else {
		l.head = c.lnext
	}
	if c.lnext != nil {
		c.lnext.lprev = c.lprev
	} else {
		l.tail = c.lprev
	}
	c.lprev, c.lnext = nil, nil
}

// idleDeadline returns when c is forgotten for silence (math.MaxInt64: not while it has
// outgoing data or is closing; those have their own timers).
//
//   - A message from the peer is partly received: the peer has IdleTimeout (an unproven
//     one UnprovenTimeout) from its last packet; then c is aborted and the buffers freed.
//   - Nothing pending, accepted connection: forgotten after the same time.
//   - Nothing pending, dialled connection: forgotten after half of what the peer waits
//     (UnprovenTimeout until we have sent it its own ID), so that the dialler re-dials
//     before the peer could forget it and answer a new message with a RESET.
func (c *conn) idleDeadline(cfg *Config) int64 {
	if c.outstanding() || c.closeReq || c.peerClosed {
		return math.MaxInt64
	}
	if c.initiator && !c.partial() {
		return c.lastActive + cfg.idleFor(c.echoed)/2
	}
	return c.lastRecv + cfg.idleFor(c.proven)
}

// idleFor is IdleTimeout for a peer that has shown it receives at its address
// (proven, or echoed for the dialler), else UnprovenTimeout, in ns.
func (c *Config) idleFor(shown bool) int64 {
	if shown {
		return int64(c.IdleTimeout)
	}
	return int64(c.UnprovenTimeout)
}

// expire handles c's idle deadline: abort it if a message from the peer is partly
// received (the peer is told), else forget it quietly.
func (e *Endpoint) expire(now int64, c *conn) {
	if c.partial() {
		e.abort(now, c, withPeer(c, ErrIdle))
		return
	}
	e.stats.ConnsExpired++
	e.remove(now, c, nil)
}
