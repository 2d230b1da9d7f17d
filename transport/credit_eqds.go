package transport

import (
	"github.com/smartt-transport/smartt/cc/eqds"
	"github.com/smartt-transport/smartt/transport/wire"
)

// EQDS's receiver half (cc/eqds): the endpoint's (the host's) connections with requests
// not yet granted, served round robin, one PULL of at most one MTU at a time, spaced at
// the link rate. Its sender half is the controller itself (algos_eqds.go).
func init() {
	registerCredit(creditRegistration{name: "eqds", prepare: func(cfg *Config) (func(e *Endpoint) puller, error) {
		p, err := eqdsParams(cfg)
		if err != nil {
			return nil, err
		}
		return func(e *Endpoint) puller { return &pullPacer{e: e, p: p} }, nil
	}})
}

// pullPacer is EQDS's puller.
type pullPacer struct {
	e  *Endpoint
	p  *eqds.Params
	pc eqds.Pacer
	q  ring[*conn]
}

func (pp *pullPacer) request(now int64, c *conn, n int, owd int64, whole bool) {
	if whole {
		qd := c.rxPull.QueueDelay(owd)
		pc := &pp.pc
		if pc.WindowDone(now) {
			pc.Drain(now, pp.lastHopQueue(), pp.p)
		}
		if ep, ok := pc.Measuring(now, pp.p); ok {
			c.rxPull.Record(ep, qd)
		}
	} else {
		pp.pc.OnTrim(now, pp.p)
	}
	if !c.rxPull.Request(n, pp.p) {
		pp.e.stats.PullDebtCapped++
	}
	pp.queue(now, c)
}

func (pp *pullPacer) queue(now int64, c *conn) {
	if !c.inPull {
		if pp.q.len() == 0 {
			pp.pc.Wake(now)
		}
		c.inPull = true
		pp.q.push(c)
	}
}

// lastHopQueue returns the largest of the window's per-connection minimum queueing
// delays over the connections being pulled (eqds.Pacer's drain), or -1. It runs once
// per window (half a base RTT at most), not per packet.
func (pp *pullPacer) lastHopQueue() int64 {
	q, ep := int64(-1), pp.pc.Epoch()
	for i := range pp.q.len() {
		c := pp.q.buf[(pp.q.head+i)&(len(pp.q.buf)-1)]
		if v, ok := c.rxPull.WindowMin(ep); ok && !c.dead {
			q = max(q, v)
		}
	}
	return q
}

// poll writes the next PULL if the pacer allows one now.
func (pp *pullPacer) poll(now int64, buf []byte) (Transmit, bool) {
	e := pp.e
	for pp.q.len() > 0 {
		c := *pp.q.peek()
		pending := c.rxPull.Pending()
		if c.dead || c.peerID == 0 || (pending == 0 && !c.regrant) {
			pp.q.pop()
			c.inPull, c.regrant = false, false
			continue
		}
		if pending > 0 && !pp.pc.Ready(now) {
			return Transmit{}, false
		}
		pp.q.pop()
		g, cum := c.rxPull.Grant(pp.p)
		c.regrant = false
		if g > 0 {
			pp.pc.OnPull(now, g, pp.p)
		}
		if c.rxPull.Pending() > 0 {
			pp.q.push(c) // round robin over the connections with requests
		} else {
			c.inPull = false
		}
		if cum == 0 {
			continue // a re-grant asked before anything was granted
		}
		p := e.header(c, wire.TypePull, c.nextCtrlEV(&e.cfg))
		p.Pull.Granted = cum
		var t Transmit
		ok := e.control(c, p, buf, &t)
		if t, ok = e.sealTx(now, t, ok, buf); ok {
			e.stats.PullsSent++
			return t, true
		}
	}
	return Transmit{}, false
}

func (pp *pullPacer) deadline() (int64, bool) {
	if pp.q.len() == 0 {
		return 0, false
	}
	return pp.pc.Next(), true
}

// regrant answers a sender's probe by sending the cumulative grant again: the PULL
// that carried it may have been lost, and the sender may be waiting for it.
func (pp *pullPacer) regrant(now int64, c *conn) {
	if c.rxPull.Granted() > 0 {
		c.regrant = true
		pp.queue(now, c)
	}
}
