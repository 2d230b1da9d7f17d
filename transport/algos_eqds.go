package transport

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/eqds"
	"github.com/smartt-transport/smartt/transport/seal"
	"github.com/smartt-transport/smartt/transport/wire"
)

// EQDS (cc/eqds) is an engine mode, not only a controller: its registration is
// ReceiverDriven, so every endpoint running it has a pull pacer (the receiver half) and
// its connections send only against credit (the sender half, the controller itself).
// It works without trimming: a packet dropped whole gives its credit back when the
// sender judges it lost (SACK gap or timeout), at the cost of the wait.
func init() {
	registerCC(CCRegistration{Name: "eqds", Prepare: func(cfg *Config) (func() cc.Controller, error) {
		p, err := eqdsParams(cfg)
		if err != nil {
			return nil, err
		}
		return func() cc.Controller { return eqds.New(p) }, nil
	}, ReceiverDriven: true})
}

// eqdsParams derives EQDS's constants; a data packet carries the DATA header, and the
// seal trailer with authentication on, beyond its payload.
func eqdsParams(cfg *Config) (*eqds.Params, error) {
	hdr := wire.DataHdrLen
	if cfg.Auth.Enabled() {
		hdr += seal.Overhead
	}
	return eqds.NewParams(cfg.EQDS, cfg.Network(), hdr)
}

// creditGate is a controller that sends only against credit granted in PULL packets
// (eqds.Sender): the engine asks it before every transmission.
type creditGate interface {
	CanSend(size int, retx bool) bool
	OnSend(size int, retx bool)
	OnPull(granted uint64) eqds.PullVerdict
	Respeculate()
}

// creditGateOf finds a controller's credit gate once per connection, through wrappers.
func creditGateOf(ctl cc.Controller) creditGate {
	for {
		if g, ok := ctl.(creditGate); ok {
			return g
		}
		u, ok := ctl.(interface{ Unwrap() cc.Controller })
		if !ok {
			return nil
		}
		ctl = u.Unwrap()
	}
}

// pullPacer is the endpoint's (the host's) receiver half of EQDS: the connections with
// requests not yet granted, served round robin, one PULL of at most one MTU at a time,
// spaced at the link rate.
type pullPacer struct {
	p  *eqds.Params
	pc eqds.Pacer
	q  ring[*conn]
}

// newPullPacer returns the pacer of an endpoint whose controller is receiver-driven,
// or nil.
func newPullPacer(cfg *Config) (*pullPacer, error) {
	r, ok := ccRegistry[cfg.CC]
	if !ok || !r.ReceiverDriven {
		return nil, nil
	}
	p, err := eqdsParams(cfg)
	if err != nil {
		return nil, err
	}
	return &pullPacer{p: p}, nil
}

// pullRequest records that an arriving packet of c (data, or a trimmed header) asks for
// n more bytes of credit; a whole data packet's one-way delay (owd, receive minus send
// timestamp) tells the pacer how long it queued.
func (e *Endpoint) pullRequest(now int64, c *conn, n int, owd int64, whole bool) {
	pp := e.pull
	if pp == nil {
		return
	}
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
		e.stats.PullDebtCapped++
	}
	e.queuePull(now, c)
}

func (e *Endpoint) queuePull(now int64, c *conn) {
	if !c.inPull {
		if e.pull.q.len() == 0 {
			e.pull.pc.Wake(now)
		}
		c.inPull = true
		e.pull.q.push(c)
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

// pollPull writes the next PULL if the pacer allows one now.
func (e *Endpoint) pollPull(now int64, buf []byte) (Transmit, bool) {
	pp := e.pull
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
		t, ok := e.control(c, p, buf)
		if t, ok = e.sealTx(now, t, ok, buf); ok {
			e.stats.PullsSent++
			return t, true
		}
	}
	return Transmit{}, false
}

// pullDeadline returns when the pacer next has a PULL to send.
func (e *Endpoint) pullDeadline() (int64, bool) {
	if e.pull == nil || e.pull.q.len() == 0 {
		return 0, false
	}
	return e.pull.pc.Next(), true
}

// regrant answers a sender's probe by sending the cumulative grant again: the PULL
// that carried it may have been lost, and the sender may be waiting for it.
func (e *Endpoint) regrant(now int64, c *conn) {
	if e.pull != nil && c.rxPull.Granted() > 0 {
		c.regrant = true
		e.queuePull(now, c)
	}
}

// onPull takes a PULL on the sender side. A PULL for a connection that does not send
// against credit, one older than a grant already seen, or one granting more than the
// connection ever asked for (sent) is dropped and counted.
func (e *Endpoint) onPull(now int64, c *conn, p *wire.Packet) {
	e.stats.PullsRecv++
	if c.credit == nil {
		e.stats.BadPulls++
		return
	}
	switch c.credit.OnPull(p.Pull.Granted) {
	case eqds.PullStale:
		e.stats.StalePulls++
		return
	case eqds.PullExcess:
		e.stats.BadPulls++
		return
	}
	c.lastProgress = now // the receiver is alive and granting: waiting is progress
	e.markReady(c)
}
