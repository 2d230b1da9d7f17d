package daemon

import (
	"net"
	"net/netip"
	"sync"
)

// MemNet is an in-memory datagram network for tests and examples: sockets addressed by
// IP and port, a bounded queue per socket (overflow drops, like a real network).
type MemNet struct {
	mu    sync.Mutex
	socks map[netip.AddrPort]*MemSocket
	// Mark, if set, may change a datagram in flight (set ECN/DSCP, drop it by returning false).
	Mark func(p *Packet) bool
}

// NewMemNet returns an empty network.
func NewMemNet() *MemNet { return &MemNet{socks: make(map[netip.AddrPort]*MemSocket)} }

type memPkt struct {
	data      []byte
	from      netip.AddrPort
	ecn, dscp uint8
	rx        int64
}

// MemSocket is one socket of a MemNet.
type MemSocket struct {
	net   *MemNet
	addr  netip.AddrPort
	inbox chan memPkt
	done  chan struct{}
	once  sync.Once
	group *memGroup // sockets sharing addr (Shards), nil for one
}

// memGroup is a set of sockets on one address, like a SO_REUSEPORT group: pick chooses
// the socket each datagram goes to.
type memGroup struct {
	socks []*MemSocket
	pick  func(b []byte, n int) int
}

// Socket opens the socket at addr.
func (m *MemNet) Socket(addr netip.AddrPort) *MemSocket {
	s := &MemSocket{net: m, addr: addr, inbox: make(chan memPkt, 8192), done: make(chan struct{})}
	m.mu.Lock()
	m.socks[addr] = s
	m.mu.Unlock()
	return s
}

// Shards opens n sockets sharing addr, like a SO_REUSEPORT group: each datagram sent to
// addr goes to socket pick(datagram, n) (an index out of range: socket 0), as the kernel's
// steering program would choose (for a node of n shards, NewShards).
func (m *MemNet) Shards(addr netip.AddrPort, n int, pick func(b []byte, n int) int) []*MemSocket {
	g := &memGroup{pick: pick}
	for i := 0; i < n; i++ {
		g.socks = append(g.socks, &MemSocket{net: m, addr: addr, inbox: make(chan memPkt, 8192), done: make(chan struct{}), group: g})
	}
	m.mu.Lock()
	m.socks[addr] = g.socks[0]
	m.mu.Unlock()
	return g.socks
}

// ReadBatch implements Socket.
func (s *MemSocket) ReadBatch(pkts []Packet) (int, error) {
	var p memPkt
	select {
	case p = <-s.inbox:
	case <-s.done:
		return 0, net.ErrClosed
	}
	k := 0
	for {
		q := &pkts[k]
		q.N = copy(q.Buf, p.data)
		q.Addr, q.ECN, q.DSCP, q.RxTime = p.from, p.ecn, p.dscp, p.rx
		k++
		if k == len(pkts) {
			return k, nil
		}
		select {
		case p = <-s.inbox:
		default:
			return k, nil
		}
	}
}

// GathersPayload implements PayloadGatherer: WriteBatch sends Payload after Buf[:N].
func (s *MemSocket) GathersPayload() bool { return true }

// WriteBatch implements Socket.
func (s *MemSocket) WriteBatch(pkts []Packet) (int, error) {
	select {
	case <-s.done:
		return 0, net.ErrClosed
	default:
	}
	for i := range pkts {
		p := pkts[i]
		p.Buf = p.Buf[:p.N]
		if len(p.Payload) > 0 { // the datagram whole, before Mark sees (and may change) it
			p.Buf = append(append(make([]byte, 0, p.N+len(p.Payload)), p.Buf...), p.Payload...)
			p.N, p.Payload = len(p.Buf), nil
		}
		if s.net.Mark != nil && !s.net.Mark(&p) {
			continue
		}
		s.net.mu.Lock()
		dst := s.net.socks[p.Addr]
		s.net.mu.Unlock()
		if dst == nil {
			continue
		}
		if g := dst.group; g != nil {
			if i := g.pick(p.Buf[:p.N], len(g.socks)); i > 0 && i < len(g.socks) {
				dst = g.socks[i]
			}
		}
		mp := memPkt{data: append([]byte(nil), p.Buf[:p.N]...), from: s.addr, ecn: p.ECN, dscp: p.DSCP, rx: Now()}
		select {
		case dst.inbox <- mp:
		default: // queue full: dropped
		}
	}
	return len(pkts), nil
}

// Close implements Socket.
func (s *MemSocket) Close() error {
	s.once.Do(func() {
		close(s.done)
		s.net.mu.Lock()
		if s.net.socks[s.addr] == s {
			delete(s.net.socks, s.addr)
		}
		s.net.mu.Unlock()
	})
	return nil
}
