package transport

import "github.com/smartt-transport/smartt/transport/wire"

func init() {
	registerRecovery(recoveryMode{
		name: RecoveryEC,
		// A data packet may be rebuilt from the block's parity, which leaves after the
		// block's last data packet: judge it against packets beyond the block.
		threshold: func(c *Config) int {
			k, m := c.ECBlock()
			return c.ReorderThreshold + k + m
		},
		new: func(e *Endpoint) recoverer { return &ecRecovery{ecCodec: newECCodec(&e.cfg), e: e} },
	})
}

// ecRecovery is erasure coding's part in the core (the coding itself is ec.go).
type ecRecovery struct {
	baseRecovery
	*ecCodec
	e *Endpoint
}

func (*ecRecovery) newConn(c *conn) { c.ecTx = &ecSender{} }

// trimNack: a first transmission's NACK waits until its block's parity shows it cannot
// rebuild it (ecTrimCheck); parity lost unseen leaves it to the sender's SACK-gap rule
// (widened by a block) or its timeout. A trimmed resend is NACKed at once: its block's
// parity has had its chance.
func (x *ecRecovery) trimNack(c *conn, d *wire.Data, retx bool, nk nackEntry) bool {
	e := x.e
	if retx {
		return false
	}
	e.ecDeferNack(c, nk)
	if r := c.rx.get(d.MsgID); r != nil {
		e.ecTrimmedIn(c, r, int(d.Offset)) // its block's parity may be in already
	}
	return true
}

// rxPlaced notes the message's PSN numbering: parity must agree with it.
func (*ecRecovery) rxPlaced(r *rxMsg, d *wire.Data) { r.anchor.note(d) }
