package transport

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/transport/wire"
)

// Return-to-sender trimming (the AI-training load-balancing study, docs/results/ai-lb.md):
// a switch whose queue is full cuts a DATA packet to its header and sends the header back
// to the packet's sender, addresses swapped and FlagTrimmed|FlagReturned set, instead of
// on to the receiver. The sender reads it as a NACK of that PSN, one path's worth of
// delay sooner than a receiver's NACK.
//
// A returned header is untrusted input: anyone can send one. It is acted on only if it
// names a live connection of ours (its SrcConn is our ID), comes from that connection's
// peer address (the switch swapped addresses: the packet's source is the original
// destination), carries the peer's ID we had sent (or none, before we learnt it), and
// names a PSN in flight whose latest transmission has exactly the echoed TxTime (a forger
// would have to guess the timestamp, as for a NACK). Anything else is counted in
// Stats.ReturnedBad and dropped. A returned header proves nothing about the peer's
// liveness, so it refreshes no timer of the connection.

// isReturned reports whether b is a returned trimmed DATA header.
func isReturned(b []byte) bool {
	return len(b) >= wire.DataHdrLen && b[0] == wire.Version<<4|byte(wire.TypeData) &&
		wire.Flags(b[1])&(wire.FlagTrimmed|wire.FlagReturned) == wire.FlagTrimmed|wire.FlagReturned
}

// maxReturnedLen bounds the bytes of a returned header that are decoded: the DATA header
// and an INT block of the most hops.
const maxReturnedLen = wire.DataHdrLen + wire.INTHdrLen + wire.INTHopLen*wire.MaxINTHops

// onReturned acts on a returned header as on a NACK of its PSN, after authenticating it
// against the connection it names.
func (e *Endpoint) onReturned(now int64, b []byte, m *RxMeta) {
	var h [maxReturnedLen]byte
	n := copy(h[:], b[:wire.TrimmedLen(b)])
	// The seal (if any) was cut off with the payload; the header is checked against the
	// connection's state instead.
	h[1] &^= byte(wire.FlagSealed)
	p := &e.pkt
	if p.Decode(h[:n]) != nil || p.Type != wire.TypeData {
		e.stats.ReturnedBad++
		return
	}
	c := e.conns[p.SrcConn]
	if c == nil || c.dead || c.peer != m.From ||
		(p.DstConn != 0 && p.DstConn != c.peerID) {
		e.stats.ReturnedBad++
		return
	}
	psn := p.Data.PSN
	if !wire.SeqLess(psn, c.sndNxt) || wire.SeqLess(psn, c.sndUna) || p.Data.TxTime > now {
		e.stats.ReturnedBad++
		return
	}
	if sp := &c.pkts[psn&c.mask]; sp.state != pktInflight || sp.sentAt != p.Data.TxTime {
		e.stats.ReturnedBad++ // acknowledged, already resent, or not our transmission
		return
	}
	e.stats.ReturnedRecv++
	e.declareLost(now, c, psn, cc.LossTrim)
	e.touch(c, now)
}
