package transport

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/transport/wire"
)

// RecoveryGoBackN is RoCE-like loss recovery: the receiver NACKs the first gap and drops
// out-of-order data; the sender resends everything from the NACKed PSN on.
const RecoveryGoBackN = "gobackn"

func init() {
	registerRecovery(recoveryMode{
		name: RecoveryGoBackN,
		new:  func(e *Endpoint) recoverer { return goBackN{e: e} },
	})
}

// goBackN is the go-back-N receiver and sender.
type goBackN struct {
	baseRecovery
	e *Endpoint
}

func (g goBackN) rxData(_ int64, c *conn, d *wire.Data, ev uint16, trimmed, ce bool, rxTime int64) bool {
	return g.e.goBackDrop(c, d, ev, trimmed, ce, rxTime)
}

// trimNack answers a trimmed packet (a trim hint: onData's go-back receiver consumed
// trimmed data before) as goBackDrop does: a go-back NACK for the expected PSN, once.
func (g goBackN) trimNack(c *conn, _ *wire.Data, _ bool, nk nackEntry) bool {
	e := g.e
	if cum := c.tracker.Cum(); !(c.gbnNacked && c.gbnPSN == cum) && c.nacks.len() < maxNacks {
		nk.goBack, nk.psn = true, cum
		c.nacks.push(nk)
		c.gbnNacked, c.gbnPSN = true, cum
		e.stats.GoBackNacksSent++
	}
	return true
}

// timedOut: RoCE-like, the receiver dropped whatever followed the lost packet.
func (g goBackN) timedOut(now int64, c *conn, psn uint32) {
	g.e.goBack(now, c, psn+1, cc.LossTimeout, lossGoBack)
}

// detectLoss: none; the go-back receiver never holds a gap.
func (goBackN) detectLoss(int64, *conn) bool { return true }

// goBack declares every packet in flight from psn on lost (recovery "gobackn") and puts
// the retransmission queue in PSN order: the receiver takes nothing but the next PSN, so
// a resend that overtook an earlier one would only be dropped (and with a window of one
// packet, each such resend cost a timeout).
func (e *Endpoint) goBack(now int64, c *conn, psn uint32, cause, why cc.LossCause) {
	for q := psn; wire.SeqLess(q, c.sndNxt); q++ {
		if c.pkts[q&c.mask].state() == pktInflight {
			e.declareLostAs(now, c, q, cause, why)
		}
	}
	c.retxq.reset()
	for q := c.sndUna; wire.SeqLess(q, c.sndNxt); q++ {
		if c.pkts[q&c.mask].state() == pktLost {
			c.retxq.push(q)
		}
	}
}

// onGoBackNack handles a go-back-N NACK: the receiver expected nk.PSN and got a later
// packet, sent at nk.EchoTxTime, which it dropped. Everything from nk.PSN on is resent,
// unless nk.PSN's latest transmission left after that packet (the NACK belongs to an
// earlier round, which was already gone back over).
func (e *Endpoint) onGoBackNack(now int64, c *conn, nk *wire.Nack) {
	psn := nk.PSN
	if !e.goesBack() || psn != nk.CumPSN || !wire.SeqLess(psn, c.sndNxt) ||
		nk.EchoTxTime > now || nk.EchoTxTime < c.createdAt {
		e.stats.BadAcks++
		return
	}
	if wire.SeqLess(psn, c.sndUna) {
		e.stats.StaleAcks++
		return
	}
	if sp := &c.pkts[psn&c.mask]; sp.state() != pktInflight || sp.sentAt > nk.EchoTxTime {
		e.stats.StaleAcks++
		return
	}
	e.stats.GoBacks++
	e.goBack(now, c, psn, cc.LossSack, lossGoBack)
}

// goBackDrop is the go-back-N receiver (recovery "gobackn"): a packet beyond the next
// expected PSN, or a trimmed one, is dropped, and the first such packet for an expected
// PSN is answered with a go-back NACK naming it (RoCE: one NAK per sequence error; a lost
// NACK, or a lost resend, is recovered by the sender's timeout; NACKing every trimmed
// copy of the expected packet instead turned trims into go-back storms in the simulator's
// incast). It reports whether p was consumed.
func (e *Endpoint) goBackDrop(c *conn, d *wire.Data, ev uint16, trimmed, ce bool, rxTime int64) bool {
	cum := c.tracker.Cum()
	if !trimmed && !wire.SeqLess(cum, d.PSN) {
		return false // the expected packet, or a duplicate
	}
	if trimmed {
		e.stats.Trimmed++
		if wire.SeqLess(d.PSN, cum) {
			return true // a trimmed copy of a packet we hold
		}
	} else {
		e.stats.OutOfOrderDrops++
	}
	if c.gbnNacked && c.gbnPSN == cum {
		return true
	}
	if c.nacks.len() < maxNacks {
		c.nacks.push(nackEntry{goBack: true, psn: cum, ev: ev, ce: ce, txTime: d.TxTime, rxTime: rxTime})
		c.gbnNacked, c.gbnPSN = true, cum
		e.stats.GoBackNacksSent++
	}
	e.markReady(c)
	return true
}

// goesBack reports whether the endpoint runs go-back-N.
func (e *Endpoint) goesBack() bool {
	_, ok := e.rec.(goBackN)
	return ok
}
