package transport

import (
	"math/bits"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/transport/wire"
)

// RecoverySubflows is dupACK recovery per subflow (reordering-safe): the transmission on
// EV e belongs to subflow e mod Subflows, and the dupACK rule counts only later
// transmissions of the same subflow.
const RecoverySubflows = "subflows"

func init() {
	registerRecovery(recoveryMode{
		name:      RecoverySubflows,
		threshold: func(c *Config) int { return c.Recovery.dupThresh() },
		subflows:  (*Config).SubflowCount,
		new: func(e *Endpoint) recoverer {
			if n := e.cfg.SubflowCount(); n > 1 {
				return subflowRecovery{n: n, e: e}
			}
			return nil // one subflow: the dupACK rule on the whole flow
		},
	})
}

// subflowRecovery keeps per-subflow dupACK state on each connection.
type subflowRecovery struct {
	baseRecovery
	n int
	e *Endpoint
}

func (s subflowRecovery) newConn(c *conn) { c.sub = make([]subflow, s.n) }

// sent numbers the transmission within its subflow and queues it there.
func (subflowRecovery) sent(c *conn, psn uint32, sp *sentPkt) {
	f := &c.sub[int(sp.ev)%len(c.sub)]
	f.seq++
	if c.subSeq == nil {
		// Beside the send window, not in sentPkt: only this mode pays for it (once).
		c.subSeq = make([]uint32, len(c.pkts))
	}
	c.subSeq[psn&c.mask] = f.seq
	f.timeq.push(timeEntry{psn: psn, seq: sp.seq})
}

func (s subflowRecovery) detectLoss(now int64, c *conn) bool {
	s.e.subflowLoss(now, c)
	return true
}

// subflow is one subflow's dupACK state (recovery "subflows"): its own numbering of the
// transmissions on its EVs and the queue of those transmissions in send order.
type subflow struct {
	timeq    ring[timeEntry]
	seq      uint32 // transmissions so far
	maxAcked uint32 // highest acknowledged transmission number (0: none)
}

// subflowLoss applies the dupACK rule within each subflow whose highest acknowledged
// transmission moved: a packet is lost once a transmission of its own subflow sent
// DupThresh later was acknowledged. Reordering across subflows counts for nothing.
func (e *Endpoint) subflowLoss(now int64, c *conn) {
	thr := int32(e.rthr)
	for c.subDirty != 0 {
		j := bits.TrailingZeros64(c.subDirty)
		c.subDirty &= c.subDirty - 1
		f := &c.sub[j]
		for f.timeq.len() > 0 {
			t := *f.timeq.peek() // a copy: pop clears the slot
			sp := &c.pkts[t.psn&c.mask]
			if sp.state() != pktInflight || sp.seq != t.seq || !wire.SeqLess(t.psn, c.sndNxt) ||
				!wire.SeqLEQ(c.sndUna, t.psn) {
				f.timeq.pop() // acknowledged, or resent (then queued in its new subflow)
				continue
			}
			if int32(f.maxAcked-c.subSeq[t.psn&c.mask]) < thr {
				break
			}
			f.timeq.pop()
			e.declareLost(now, c, t.psn, cc.LossSack)
		}
	}
}
