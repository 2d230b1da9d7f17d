package transport

import (
	"errors"
	"net/netip"

	"github.com/smartt-transport/smartt/transport/wire"
)

// UnreachableCause is what the network said about a peer it could not deliver to.
type UnreachableCause uint8

// Causes of Endpoint.Unreachable.
const (
	// UnreachablePort: the peer's host answered ICMP port unreachable (nothing listening).
	UnreachablePort UnreachableCause = iota + 1
	// UnreachableHost: a router or the host answered ICMP host, network or
	// administratively unreachable.
	UnreachableHost
	// UnreachableEVPort: the address is a smartt daemon's EV (source) port, whose socket
	// layer answered the first contact with an EV-port RESET (IsEVPortReset).
	UnreachableEVPort
)

// IsEVPortReset reports whether p is the RESET a socket layer sends from an EV port to
// a first contact that arrived there: its SrcConn repeats the sender's own ID (DstConn),
// which no engine's RESET does (an engine's names an ID of its own).
func IsEVPortReset(p *wire.Packet) bool {
	return p.Type == wire.TypeReset && p.SrcConn == p.DstConn
}

// ErrUnreachable is what every UnreachableError matches with errors.Is.
var ErrUnreachable = errors.New("transport: peer unreachable (ICMP)")

// UnreachableError fails the messages of a connection whose peer the network reported
// unreachable before the peer ever answered.
type UnreachableError struct {
	Peer  netip.AddrPort
	Cause UnreachableCause
}

// Error names the peer and the likely cause.
func (e *UnreachableError) Error() string {
	switch e.Cause {
	case UnreachablePort:
		return "transport: nothing listening at " + e.Peer.String() + " (ICMP port unreachable)"
	case UnreachableEVPort:
		return "transport: nothing listening at " + e.Peer.String() + ": it is an EV (source) port of a smartt daemon; send to the daemon's listen port"
	}
	return "transport: " + e.Peer.String() + " unreachable (ICMP host unreachable)"
}

// Is makes errors.Is(err, ErrUnreachable) hold.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnreachable }

// peerError is an engine error with the peer it concerns, so a failure names it.
type peerError struct {
	err    error
	peer   netip.AddrPort
	silent bool // a dial the peer never answered: likely a wrong address or port
}

func (e *peerError) Error() string {
	if e.silent {
		return e.err.Error() + " (peer " + e.peer.String() + " never answered: is a smartt daemon listening there, on its listen port rather than an EV port?)"
	}
	return e.err.Error() + " (peer " + e.peer.String() + ")"
}

func (e *peerError) Unwrap() error { return e.err }

// withPeer returns err naming c's peer; errors.Is(result, err) holds.
func withPeer(c *conn, err error) error {
	return &peerError{err: err, peer: c.peer, silent: c.initiator && c.peerID == 0}
}

// Unreachable tells the engine that the network reported peer (the destination address
// and port of a datagram we sent) unreachable, e.g. an ICMP error the socket layer read.
// ICMP is unauthenticated and anyone on the path can forge it, so it is acted on only
// for connections we dialled whose peer has never sent us a packet: their messages
// fail at once with an UnreachableError. Connections the peer has answered on ignore
// it (Stats.UnreachableIgnored). It returns the number of connections aborted.
func (e *Endpoint) Unreachable(now int64, peer netip.AddrPort, cause UnreachableCause) int {
	n, seen := 0, false
	for i := 0; i < len(e.list); {
		c := e.list[i]
		if c.peer != peer || c.dead {
			i++
			continue
		}
		seen = true
		if !c.initiator || c.peerID != 0 {
			e.stats.UnreachableIgnored++
			i++
			continue
		}
		e.stats.UnreachableActed++
		n++
		e.abort(now, c, &UnreachableError{Peer: peer, Cause: cause})
		// abort removed c from e.list (swapping another into i): look at i again.
	}
	if !seen {
		e.stats.UnreachableNoConn++
	}
	return n
}
