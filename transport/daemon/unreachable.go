package daemon

import (
	"net/netip"

	"github.com/smartt-transport/smartt/transport"
)

// Unreachable is a destination the network reported unreachable (an ICMP error).
type Unreachable struct {
	Peer  netip.AddrPort
	Cause transport.UnreachableCause
}

// UnreachableSource is a Socket that reports ICMP destination-unreachable errors for
// the datagrams it sent (transport/udp with IP_RECVERR).
type UnreachableSource interface {
	// WaitUnreachable blocks until reports arrive, fills dst and returns how many; an
	// error (net.ErrClosed after Close) ends the node's wait.
	WaitUnreachable(dst []Unreachable) (int, error)
}

// unreachableLoop hands the socket's ICMP reports to the engines, which fail the
// messages of connections whose peer never answered (transport.Endpoint.Unreachable).
// Every shard hears each report: with shared ports the kernel may queue it on any
// shard's socket.
func (s *shard) unreachableLoop(src UnreachableSource) {
	defer s.n.wg.Done()
	var buf [16]Unreachable
	for {
		k, err := src.WaitUnreachable(buf[:])
		if err != nil {
			return
		}
		now := Now()
		for _, sh := range s.n.shards {
			sh.mu.Lock()
			if !sh.stopped {
				for _, u := range buf[:k] {
					sh.ep.Unreachable(now, u.Peer, u.Cause)
				}
				sh.flushLocked(now)
			}
			sh.mu.Unlock()
		}
	}
}
