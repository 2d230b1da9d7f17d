package transport

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/eqds"
	"github.com/smartt-transport/smartt/transport/wire"
)

// Receiver-driven credit: the receiver schedules its peers by sending PULL packets that
// grant them bytes to send. A mechanism has two halves: the receiver's (a puller, one
// per endpoint, registered here by name) and the sender's (the controller, which sends
// only against the credit granted: a creditGate). A controller's registration names its
// mechanism (CCRegistration.Credit); an endpoint resolves it once, as it does its
// controller and recovery mode, so the hot path pays one nil check. A new mechanism (an
// NDP/Homa-style pull) is a file with its puller and a registerCredit call.

// puller is a credit mechanism's receiver half.
type puller interface {
	// request: an arriving packet of c (data, or a trimmed header: whole false) asks for
	// n more bytes of credit; owd is a whole packet's one-way delay (receive minus send
	// timestamp), for the mechanism's queueing estimate.
	request(now int64, c *conn, n int, owd int64, whole bool)
	// regrant: c's peer probed; the grant that may have been lost is sent again.
	regrant(now int64, c *conn)
	// poll writes the next PULL into buf if one is due now.
	poll(now int64, buf []byte) (Transmit, bool)
	// deadline returns when the next PULL is due; false: none is waiting.
	deadline() (int64, bool)
}

// creditGate is the sender half: a controller that sends only against credit granted in
// PULL packets (eqds.Sender). The engine asks it before every transmission.
type creditGate interface {
	CanSend(size int, retx bool) bool
	OnSend(size int, retx bool)
	OnPull(granted uint64) eqds.PullVerdict
	Respeculate()
}

// creditRegistration is one receiver-driven credit mechanism's row of the registry, in
// the shape of a controller's: Prepare runs once per endpoint and returns the
// constructor of the endpoint's receiver half.
type creditRegistration struct {
	name string
	// prepare validates the configuration and returns the constructor; the puller keeps
	// e (hooks taking it as an argument would move what e points to to the heap).
	prepare func(cfg *Config) (func(e *Endpoint) puller, error)
}

var creditRegistry = registry[creditRegistration]{}

// registerCredit adds a mechanism to the registry (registry.add's panics).
func registerCredit(r creditRegistration) {
	creditRegistry.add("credit", r.name, r, r.prepare != nil)
}

// newPuller returns the constructor of the receiver half of cfg's controller's credit
// mechanism, or nil when the controller is sender-driven.
func newPuller(cfg *Config) (func(e *Endpoint) puller, error) {
	r, ok := ccRegistry[cfg.CC]
	if !ok || r.Credit == "" {
		return nil, nil
	}
	m, err := creditRegistry.lookup("credit", r.Credit)
	if err != nil {
		return nil, err
	}
	return m.prepare(cfg)
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

// pullRequest passes an arrival's credit request to the receiver half, if any.
func (e *Endpoint) pullRequest(now int64, c *conn, n int, owd int64, whole bool) {
	if e.pull != nil {
		e.pull.request(now, c, n, owd, whole)
	}
}

// regrant passes a peer's probe to the receiver half, if any.
func (e *Endpoint) regrant(now int64, c *conn) {
	if e.pull != nil {
		e.pull.regrant(now, c)
	}
}

// pullDeadline returns when the receiver half next has a PULL to send.
func (e *Endpoint) pullDeadline() (int64, bool) {
	if e.pull == nil {
		return 0, false
	}
	return e.pull.deadline()
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
