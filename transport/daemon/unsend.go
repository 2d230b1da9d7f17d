package daemon

import (
	"net/netip"
	"slices"
)

// MsgHandle names a message handed to the engine (SendTo), for Unsend. It points at the
// message's pending record, not its engine ID: an Unsend of an older message renumbers
// the newer ones.
type MsgHandle struct {
	peer netip.AddrPort
	p    *pending
	gen  uint64
}

// SendTo is Send (flush true) or SendHeld (false) that also returns the message's
// handle.
func (n *Node) SendTo(peer netip.AddrPort, msg []byte, done func(SendResult), flush bool) (MsgHandle, error) {
	return n.send(peer, msg, done, flush)
}

// Unsend takes a message back from the engine if no byte of it has been sent: then its
// done is never called and the caller owns msg again. It reports whether it did. The
// engine takes back only a connection's newest message (transport.Endpoint.Unsend), so
// for an older one the messages queued behind it are taken back first, newest first,
// and queued again in their order once it is out (under new engine IDs, none of them
// having started either); if one of them has started, all stay as they were.
func (n *Node) Unsend(h MsgHandle) bool {
	if !h.peer.IsValid() || h.p == nil {
		return false
	}
	s := n.shardFor(h.peer)
	s.mu.Lock()
	defer s.mu.Unlock()
	p := h.p
	if p.gen != h.gen || s.stopped || s.pending[p.key] != p {
		return false
	}
	behind := s.behindLocked(p.key)
	taken := 0
	for _, q := range behind {
		if !s.ep.Unsend(q.key.conn, q.key.msg) {
			break
		}
		taken++
	}
	ok := taken == len(behind) && s.ep.Unsend(p.key.conn, p.key.msg)
	if ok {
		delete(s.pending, p.key)
	}
	s.requeueLocked(behind[:taken])
	if ok && len(s.free) < maxFreePending {
		*p = pending{}
		s.free = append(s.free, p)
	}
	return ok
}

// behindLocked returns the outstanding messages queued on k's connection after k, newest
// first (engine IDs wrap: "after" is within half the ID space). s.mu is held.
func (s *shard) behindLocked(k msgKey) []*pending {
	var out []*pending
	for key, q := range s.pending {
		if key.conn == k.conn && int32(key.msg-k.msg) > 0 {
			out = append(out, q)
		}
	}
	slices.SortFunc(out, func(a, b *pending) int { return int(int32(b.key.msg - a.key.msg)) })
	return out
}

// requeueLocked queues again, oldest first, the messages Unsend took back (given newest
// first), on the same connection; one the engine refuses now fails. s.mu is held.
func (s *shard) requeueLocked(back []*pending) {
	if len(back) == 0 {
		return
	}
	for _, q := range back {
		delete(s.pending, q.key)
	}
	now := Now()
	for i := len(back) - 1; i >= 0; i-- {
		q := back[i]
		mid, err := s.ep.Send(now, q.conn, q.msg)
		if err != nil {
			if q.done != nil {
				q.done(SendResult{Err: err, Elapsed: now - q.start})
			}
			continue
		}
		q.key = msgKey{q.conn, mid}
		s.pending[q.key] = q
	}
	s.flushLocked(now)
}
