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

// Bounds on the ICMP reports handed to the engines: each costs a scan of a shard's
// connections (about 20-70 us at 4,096), and anyone can forge them, so a flood must
// not take the engines' time. Reports beyond the rate are dropped (counted).
const (
	unreachRate  = 1000 // reports a second, per shard socket
	unreachBurst = 64
)

// reportBucket is a token bucket over report counts.
type reportBucket struct {
	tokens float64
	last   int64 // ns
}

// take returns how many of n reports at now fit the bucket, and spends them.
func (b *reportBucket) take(now int64, n int) int {
	if b.last == 0 {
		b.tokens = unreachBurst
	} else if now > b.last {
		b.tokens = min(unreachBurst, b.tokens+float64(now-b.last)*unreachRate/1e9)
	}
	b.last = now
	k := min(n, int(b.tokens))
	b.tokens -= float64(k)
	return k
}

// unreachableLoop hands the socket's ICMP reports to the engines, which fail the
// messages of connections whose peer never answered (transport.Endpoint.Unreachable).
// Every shard hears each report: with shared ports the kernel may queue it on any
// shard's socket.
func (s *shard) unreachableLoop(src UnreachableSource) {
	defer s.n.wg.Done()
	var buf [16]Unreachable
	var bucket reportBucket
	for {
		k, err := src.WaitUnreachable(buf[:])
		if err != nil {
			return
		}
		now := Now()
		took := bucket.take(now, k)
		s.n.unreachDropped.Add(uint64(k - took))
		if k = took; k == 0 {
			continue
		}
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

// UnreachableDropped counts ICMP reports not handed to the engines for the rate bound.
func (n *Node) UnreachableDropped() uint64 { return n.unreachDropped.Load() }
