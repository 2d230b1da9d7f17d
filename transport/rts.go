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
// A returned header is untrusted input: anyone can send one. It is read only when the
// configuration says the fabric returns headers (Config.ReturnToSender). It is acted on
// only if it names a live connection of ours (its SrcConn is our ID) whose peer proved its
// address (with authentication on: by authenticated packets), comes from that peer's
// address (the switch swapped addresses), carries the peer's ID we had sent, and names a
// PSN in flight whose latest transmission has exactly the echoed TxTime. The switch cut
// the seal off with the payload, so with authentication on nothing cryptographic vouches
// for it: only this match with our own transmission, which an off-path attacker would have
// to guess (a nanosecond timestamp), and the header must carry FlagSealed as ours did.
// Anything else is counted in Stats.ReturnedBad and dropped. A returned header proves
// nothing about the peer's liveness, so it refreshes no timer of the connection.
//
// An on-path attacker sees our packets and can return a copy of each while the originals
// still arrive: every copy would cost a resend and a congestion-window cut. So each
// connection keeps a trust in returns (rtsCredit less rtsSpent), judged when the packet a
// return named is acknowledged (rtsJudge): a return is false when the acknowledgement shows
// the original arrived (the packet was acknowledged before its resend left, or by an ACK
// triggered by a packet sent before the resend), inconclusive when the ACK came later but
// not triggered by the resend itself, true when the resend triggered it. Returns are acted
// on while the trust lasts; beyond it they are recorded but not acted on, and a recorded
// return whose packet the ordinary detectors later found lost (resent) proves true and
// restores trust. Trust grows only with losses the attacker would have had to cause: an
// injector can do no more than a dropper.
const (
	rtsCredit           = 8  // the trust a connection starts with, in returns
	rtsFalseCost        = 4  // a return proven false
	rtsUnsureCost       = 0  // a return acknowledged after its resend left, not triggered by it: it frees its reservation
	rtsTrueRefund       = 4  // a return proven true
	rtsMaxSpent         = 64 // spent trust is remembered up to this much
	retActed      uint8 = 1  // sentPkt.ret: the return was acted on (the packet resent)
	retIgnored    uint8 = 2  // sentPkt.ret: the return was recorded, not acted on
)

// isReturned reports whether b is a returned trimmed DATA header.
func isReturned(b []byte) bool {
	return len(b) >= wire.DataHdrLen && b[0] == wire.Version<<4|byte(wire.TypeData) &&
		wire.Flags(b[1])&(wire.FlagTrimmed|wire.FlagReturned) == wire.FlagTrimmed|wire.FlagReturned
}

// maxReturnedLen bounds the bytes of a returned header that are decoded: the DATA header
// and an INT block of the most hops.
const maxReturnedLen = wire.DataHdrLen + wire.INTHdrLen + wire.INTHopLen*wire.MaxINTHops

// onReturned acts on a returned header as on a NACK of its PSN, after authenticating it
// against the connection it names and while the connection trusts returns.
func (e *Endpoint) onReturned(now int64, b []byte, m *RxMeta) {
	if !e.cfg.ReturnToSender {
		e.stats.ReturnedIgnored++
		return
	}
	var h [maxReturnedLen]byte
	n := copy(h[:], b[:wire.TrimmedLen(b)])
	sealed := wire.Flags(h[1])&wire.FlagSealed != 0
	// The seal (if any) was cut off with the payload; the header is checked against the
	// connection's state instead.
	h[1] &^= byte(wire.FlagSealed)
	p := &e.pkt
	if p.Decode(h[:n]) != nil || p.Type != wire.TypeData || sealed != (e.auth != nil) {
		e.stats.ReturnedBad++
		return
	}
	c := e.conns[p.SrcConn]
	if c == nil || c.dead || !c.proven || c.peer != m.From ||
		(p.DstConn != 0 && p.DstConn != c.peerID) {
		e.stats.ReturnedBad++
		return
	}
	psn := p.Data.PSN
	if !wire.SeqLess(psn, c.sndNxt) || wire.SeqLess(psn, c.sndUna) || p.Data.TxTime > now {
		e.stats.ReturnedBad++
		return
	}
	sp := &c.pkts[psn&c.mask]
	if sp.state() != pktInflight || sp.sentAt != p.Data.TxTime {
		e.stats.ReturnedBad++ // acknowledged, already resent, or not our transmission
		return
	}
	if c.rtsSpent >= rtsCredit {
		sp.setRet(retIgnored) // judged when it is acknowledged (rtsJudge)
		e.stats.ReturnedIgnored++
		return
	}
	sp.setRet(retActed)
	// Reserved until judged: at most the trust's worth of returns unjudged at once. A
	// packet returned again after its resend reserves again, and is judged once: each
	// further return of it costs a unit for good.
	c.rtsSpent++
	e.stats.ReturnedRecv++
	e.declareLost(now, c, psn, cc.LossTrim)
	e.touch(c, now)
}

// rtsJudge weighs the return that named sp (PSN psn), now acknowledged by a, against the
// connection's trust in returns (see the comment at the top of this file).
func (e *Endpoint) rtsJudge(c *conn, sp *sentPkt, psn uint32, a *wire.Ack) {
	cost := int32(0)
	switch {
	case sp.ret() == retIgnored && sp.tx > 1:
		cost = -rtsTrueRefund // lost after all: the ordinary detectors resent it
	case sp.ret() == retIgnored:
		cost = 1 // the original arrived: false, though not acted on
	case sp.state() == pktLost || a.EchoTxTime < sp.sentAt:
		cost = rtsFalseCost - 1 // (1 was reserved when it was acted on)
		e.stats.ReturnedFalse++
	case psn == a.AckedPSN && a.EchoTxTime == sp.sentAt:
		cost = -rtsTrueRefund - 1
	default:
		cost = rtsUnsureCost - 1
	}
	c.rtsSpent = min(max(c.rtsSpent+cost, 0), rtsMaxSpent)
	sp.setRet(0)
}
