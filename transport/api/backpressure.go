package api

import (
	"encoding/binary"
	"net/netip"
	"time"
)

// Back-pressure (api.recv_backpressure, docs/api.md "Back-pressure"): a received message
// is never dropped. A session whose receive queue is full has new messages for it refused
// at their first packet (Server.Ready, the engine's transport.RecvGate), the sending
// daemon resends that packet after a back-off, and its client's Sent waits; the sending
// daemon gives each destination endpoint a connection of its own (Lane), so a full
// session stalls only the traffic to it.

// recvOverhead is what one queued received message costs besides its buffers: its
// outFrame in the queue, its entry in recvSizes, the engine's chunk table, rounded up.
const recvOverhead = 256

// heldSize is a received message's charge to the receive queue: the buffers it holds at
// their capacity (a 4-byte message in a 16 KiB receive chunk holds the chunk), plus
// recvOverhead.
func heldSize(b msgBody) int64 {
	n := int64(recvOverhead)
	for _, p := range b.pieces {
		n += int64(cap(p))
	}
	if b.chunks {
		n += int64(cap(b.pieces)) * 24 // the chunk table (slice headers)
	}
	return n
}

// Ready implements transport.RecvGate: a new message for a session may start unless the
// session's queue holds api.max_recv_queue (besides its oldest message) or all sessions'
// api.max_recv_queue_total. Messages for nobody, or not the API's, pass (they are
// acknowledged and counted as before). Always true without api.recv_backpressure.
func (s *Server) Ready(peer netip.AddrPort, n int, head []byte) bool {
	if !s.cfg.RecvBackpressure {
		return true
	}
	dst, _, ok := parseEnvelope(head)
	if !ok {
		return true
	}
	s.mu.Lock()
	x := s.eps[dst]
	s.mu.Unlock()
	if x == nil {
		return true
	}
	x.mu.Lock()
	full := !x.dead && (x.behindLocked() >= s.cfg.MaxRecvQueue || s.recvTotal.Load() >= s.cfg.MaxRecvQueueTotal)
	x.mu.Unlock()
	if full {
		s.recvPaused.Add(1)
	}
	return !full
}

// Lane is the daemon's daemon.Options.Lane: a message's destination endpoint, read from
// its envelope, so that every endpoint of a peer has a connection (and an order) of its
// own.
func Lane(msg []byte) uint32 {
	if len(msg) < envelopeLen {
		return 0
	}
	return binary.BigEndian.Uint32(msg[4:])
}

// writeDeadline is the deadline of a write to the client starting now: write_timeout
// from now, or none under back-pressure (a client that is slow to read is held back, not
// disconnected; one that closes its socket fails the write at once).
func (x *session) writeDeadline() time.Time {
	if x.srv.cfg.RecvBackpressure {
		return time.Time{}
	}
	return time.Now().Add(time.Duration(x.srv.cfg.WriteTimeout))
}
