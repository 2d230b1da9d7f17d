package transport

import (
	"net/netip"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/transport/wire"
)

// Receiver not ready (RNR): flow control that reaches the sending application.
//
// A receiver whose application cannot take more for a destination (the daemon: a client
// session whose receive queue is full) refuses the first packet (offset 0) of every new
// message for it: the packet is not recorded, so not acknowledged, and the sender is told
// with a NACK flagged wire.FlagRNR. The sender then sends nothing on the connection for a
// back-off (doubling from rnrMinDelay to rnrMaxDelay while refusals repeat) and resends
// the packet. A refusal is neither a loss (congestion control is not told) nor a
// transmission that counts towards MaxRetransmits, and it shows the peer alive, so the
// connection's idle timeout does not run out either: the message waits, however long,
// while the receiver keeps answering. Packets of the message beyond the first that were
// in flight are received as usual (the engine's window and budget bound them).
//
// Refusing only first packets keeps this per message; the connection's own order stalls
// what follows the refused message, which is why the daemon gives every destination
// endpoint a connection of its own (daemon.Options.Lane): a slow session then stalls no
// other session's traffic (docs/engine.md, "Flow control").

// RecvGate lets the application refuse new messages while their destination cannot take
// them. Ready is called with the engine's lock held when a new message's offset-0 packet
// arrives (head is its payload, n the message's length); it must not call back into the
// engine.
type RecvGate interface {
	Ready(peer netip.AddrPort, n int, head []byte) bool
}

// Back-off between a refused packet and its resend: it starts near the round trip (so a
// receiver that drains quickly loses little) and doubles up to rnrMaxDelay (so a receiver
// that stays full costs one small packet each way per rnrMaxDelay).
const (
	rnrMinDelay = 100_000    // ns
	rnrMaxDelay = 16_000_000 // ns
)

// lossRNR is the sentPkt.cause of a packet the receiver refused (RNR NACK).
const lossRNR cc.LossCause = 0x81

// gateRefuses asks Hooks.Gate about the new message whose offset-0 packet p is: when it
// refuses, an RNR NACK is queued for the packet and true is returned (the caller drops
// the packet unrecorded).
func (e *Endpoint) gateRefuses(c *conn, p *wire.Packet, m *RxMeta, ce bool) bool {
	d := &p.Data
	if e.hooks.Gate.Ready(c.peer, int(d.MsgLen), p.Payload) {
		return false
	}
	e.stats.RNRSent++
	if c.nacks.len() < maxNacks {
		c.nacks.push(nackEntry{rnr: true, psn: d.PSN, ev: p.EV, ce: ce, txTime: d.TxTime, rxTime: m.RxTime})
	}
	e.markReady(c)
	return true
}

// onRNR handles an RNR NACK: the transmission it echoes was refused, not lost. The packet
// goes back to the retransmission queue uncounted, and the connection sends no data until
// the back-off ends (onTimer).
func (e *Endpoint) onRNR(now int64, c *conn, nk *wire.Nack) {
	psn := nk.PSN
	if !wire.SeqLess(psn, c.sndNxt) || wire.SeqLess(c.sndNxt, nk.CumPSN) || nk.EchoTxTime > now {
		e.stats.BadAcks++
		return
	}
	if wire.SeqLess(psn, c.sndUna) {
		e.stats.StaleAcks++
		return
	}
	sp := &c.pkts[psn&c.mask]
	if sp.state() != pktInflight || sp.sentAt != nk.EchoTxTime {
		e.stats.StaleAcks++
		return
	}
	e.stats.RNRRecv++
	sp.setState(pktLost)
	sp.cause = lossRNR
	sp.tx-- // refused, not lost: it does not count towards max_retransmits
	c.inflight -= int(sp.size)
	c.retxq.push(psn)
	c.lastProgress = now // the receiver is alive and answering
	delay := int64(rnrMinDelay) << min(c.rnrN, 8)
	if c.srtt > delay {
		delay = c.srtt
	}
	c.rnrN++
	c.rnrAt = max(c.rnrAt, now+min(delay, rnrMaxDelay))
	e.touch(c, now)
}

// rnrWait reports whether c's data must wait for an RNR back-off.
func (c *conn) rnrWait(now int64) bool { return c.rnrAt > now }

// Displace moves the message received into the Placer's buffer under token tok back into
// the engine's own chunks (charged at their capacity), so that the Placer may reuse its buffer
// at once: the daemon displaces a placement that stalls at the head of a client's receive
// ring. The message is then delivered in chunks (Event.Placed 0) and Unplace is not
// called for it. It reports whether the message was found (false: it was delivered or
// given back already).
func (e *Endpoint) Displace(tok uint64) bool {
	if tok == 0 {
		return false
	}
	for _, c := range e.list {
		for r := range c.rx.all {
			if r.placeTok != tok {
				continue
			}
			for i, ch := range r.chunks {
				if ch == nil {
					continue
				}
				own := e.getChunk(len(ch))
				copy(own, ch)
				r.chunks[i] = own
				// A placed chunk was charged its length; the engine's holds its class's
				// capacity. Charged whatever the budget: the Placer's buffer is freed.
				extra := bufCap(len(ch)) - uint64(len(ch))
				r.held += extra
				c.held += extra
				e.stats.RecvBuffered += extra
				e.stats.RecvBufferedMax = max(e.stats.RecvBufferedMax, e.stats.RecvBuffered)
			}
			r.place, r.placeTok = nil, 0
			e.stats.MsgsDisplaced++
			return true
		}
	}
	return false
}
