package daemon

import "net/netip"

// MsgHandle names a message handed to the engine (SendTo), for Unsend.
type MsgHandle struct {
	peer netip.AddrPort
	key  msgKey
}

// SendTo is Send (flush true) or SendHeld (false) that also returns the message's
// handle.
func (n *Node) SendTo(peer netip.AddrPort, msg []byte, done func(SendResult), flush bool) (MsgHandle, error) {
	return n.send(peer, msg, done, flush)
}

// Unsend takes a message back from the engine if no byte of it has been sent and it is
// the newest message queued to its peer (transport.Endpoint.Unsend): then its done is
// never called and the caller owns msg again. It reports whether it did.
func (n *Node) Unsend(h MsgHandle) bool {
	if !h.peer.IsValid() {
		return false
	}
	s := n.shardFor(h.peer)
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending[h.key]
	if p == nil || s.stopped || !s.ep.Unsend(h.key.conn, h.key.msg) {
		return false
	}
	delete(s.pending, h.key)
	if len(s.free) < maxFreePending {
		*p = pending{}
		s.free = append(s.free, p)
	}
	return true
}
