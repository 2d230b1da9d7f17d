package ackpath

import (
	"errors"
	"fmt"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport/wire"
)

// Config is the receiver's ACK policy.
type Config struct {
	// Every sends an ACK after this many data packets (1 = an ACK per packet, what
	// per-ACK congestion control such as SMaRTT expects). At most wire.MaxCleanEVs.
	Every int `yaml:"every"`
	// EveryBytes, if > 0, also sends an ACK once this many payload bytes arrived since the
	// previous one (htsim's receiver: 16,384), whichever of Every and EveryBytes comes
	// first. 0 (default): packets only.
	EveryBytes int `yaml:"every_bytes"`
	// MaxDelay bounds how long (ns) a received packet may wait for its ACK when Every > 1.
	MaxDelay config.Duration `yaml:"max_delay"`
	// CleanEVs reports every unmarked EV since the previous ACK (ACK extension), so a
	// balancer can recycle all of them, not only the triggering packet's.
	CleanEVs bool `yaml:"clean_evs"`
	// SackWords is the SACK bitmap width in 64-bit words (1..4).
	SackWords int `yaml:"sack_words"`
	// EchoEV sends each ACK on the EV of the data packet that triggered it (the EV it
	// echoes), as htsim does (its ACK carries the data packet's path id, which switches
	// hash), so an ACK takes a path a balancer chose and reaches the sender whenever the
	// EV's path works both ways. false (default): ACKs take the connection's control
	// EVs in turn, spread over every reverse path whatever the balancer does
	// (docs/engine.md).
	EchoEV bool `yaml:"echo_ev"`

	// Immediate-ACK triggers besides Every and MaxDelay. A trim (NACK), a
	// duplicate, a message completion, an ACK request and (without OnReorder) a retransmission filling a hole
	// always ACK at once, and so does a packet arriving ReorderThreshold or more PSNs past
	// a hole (the sender's loss detector needs that ACK).

	// OnReorder ACKs every out-of-order arrival at once (formerly the only policy;
	// under per-packet spraying nearly every packet arrives out of order, so it defeats
	// Every). false leaves reordering shallower than the reorder threshold to Every.
	OnReorder bool `yaml:"on_reorder"`
	// OnCE ACKs a CE-marked packet at once, as htsim's UEC receiver does.
	OnCE bool `yaml:"on_ce"`
	// DeferFill (with OnReorder off) lets a packet that fills a hole wait for Every,
	// EveryBytes or MaxDelay like any other instead of forcing an ACK: under spraying
	// most holes are reordering, not loss, and htsim's receiver forces no ACK for them.
	// false (default): a filled hole is ACKed at once.
	DeferFill bool `yaml:"defer_fill"`
	// CompleteDelay, if > 0, lets the ACK of a packet that completes a message
	// of one packet wait up to this long (ns) for the receiver's next data packet to the
	// same peer, typically the application's answer, and leave in the same transmit batch
	// (Coalescer.Hold): a request and reply exchange then costs each side one socket write
	// and one wake-up fewer. Without an answer it leaves at the deadline, and the wire's
	// HoldTime takes the wait out of the sender's RTT sample. 0 (default): at once, as
	// before. At most MaxCompleteDelay; the engine holds at most half of its RTO floor
	// (min_rto, or fixed_rto when set), so a held ACK cannot time its packet out; the daemon
	// turns it off with several engine shards (the answer leaves from another engine).
	CompleteDelay config.Duration `yaml:"complete_delay"`
}

// MaxCompleteDelay bounds Config.CompleteDelay: beyond a millisecond a sender that gets no
// answer would wait longer for its completion than the daemon holds its Sent frames.
const MaxCompleteDelay = 1_000_000

// MaxEveryBytes bounds Config.EveryBytes.
const MaxEveryBytes = 16 << 20

// DefaultConfig is an ACK per packet with a 256-bit SACK bitmap.
func DefaultConfig() Config {
	return Config{Every: 1, MaxDelay: 10_000, SackWords: wire.MaxSackWords, OnReorder: true}
}

// Urgent reports whether a newly placed data packet needs an immediate ACK: psn is its
// PSN, cumBefore and cumAfter the cumulative PSN before and after placing it; ackReq is
// the sender's ACK request flag, complete whether it completed a message; reorder is the
// transport's reorder threshold. Duplicates and trims are urgent before this is asked.
func (c Config) Urgent(psn, cumBefore, cumAfter uint32, ce, ackReq, complete bool, reorder int) bool {
	switch {
	case ackReq || complete || (ce && c.OnCE):
		return true
	case psn == cumBefore:
		// Filled a hole: the sender is waiting on it. With OnReorder the out-of-order
		// packets behind the hole were ACKed at once already, and the in-order one is
		// coalesced as formerly (so a coalesced ACK still carries its clean EVs).
		return !c.OnReorder && !c.DeferFill && cumAfter-cumBefore > 1
	case c.OnReorder:
		return true
	}
	return psn-cumBefore >= uint32(reorder) // a hole older than the reorder threshold
}

// Validate checks the ranges of every field.
func (c Config) Validate() error {
	var errs []error
	if c.Every < 1 || c.Every > wire.MaxCleanEVs {
		errs = append(errs, fmt.Errorf("ack.every = %d: must be in 1..%d", c.Every, wire.MaxCleanEVs))
	}
	if c.EveryBytes < 0 || c.EveryBytes > MaxEveryBytes {
		errs = append(errs, fmt.Errorf("ack.every_bytes = %d: must be 0 (off) or in 1..%d", c.EveryBytes, MaxEveryBytes))
	}
	if c.CompleteDelay < 0 || c.CompleteDelay > MaxCompleteDelay {
		errs = append(errs, fmt.Errorf("ack.complete_delay = %v: must be 0 (off) or in 1ns..%v", c.CompleteDelay, config.Duration(MaxCompleteDelay)))
	}
	if c.MaxDelay < 0 {
		errs = append(errs, fmt.Errorf("ack.max_delay = %d ns: must be >= 0", c.MaxDelay))
	}
	if c.SackWords < wire.MinSackWords || c.SackWords > wire.MaxSackWords {
		errs = append(errs, fmt.Errorf("ack.sack_words = %d: must be in %d..%d (64..256 bits)",
			c.SackWords, wire.MinSackWords, wire.MaxSackWords))
	}
	return errors.Join(errs...)
}

// Coalescer accumulates the data packets received since the previous ACK and decides when
// the next ACK is due.
type Coalescer struct {
	cfg     Config
	pending int   // data packets since the previous ACK
	bytes   int   // their payload bytes
	ce      int   // of which CE-marked
	firstAt int64 // arrival of the oldest unacknowledged packet
	nclean  int
	clean   [wire.MaxCleanEVs]uint16
	urgent  bool
	// holdUntil > 0: the pending ACK is held (Hold) and due then at the latest, or as
	// soon as the receiver sends data to the peer (the transport releases it).
	holdUntil int64
}

// NewCoalescer returns a coalescer for cfg (which must be valid).
func NewCoalescer(cfg Config) Coalescer { return Coalescer{cfg: cfg} }

// OnData records a received data packet. urgent asks for an immediate ACK (duplicate,
// out-of-order arrival, ACK request, message complete). It reports whether an ACK is due now.
func (c *Coalescer) OnData(now int64, ce bool, ev uint16, urgent bool) bool {
	return c.OnDataBytes(now, ce, ev, 0, urgent)
}

// OnDataBytes is OnData for a packet of n payload bytes (counted for EveryBytes).
func (c *Coalescer) OnDataBytes(now int64, ce bool, ev uint16, n int, urgent bool) bool {
	if c.pending == 0 {
		c.firstAt = now
	}
	c.pending++
	c.bytes += n
	if ce {
		c.ce++
	} else if c.cfg.CleanEVs && c.nclean < len(c.clean) {
		c.clean[c.nclean] = ev
		c.nclean++
	}
	c.urgent = c.urgent || urgent
	c.holdUntil = 0 // a packet not held ends the hold: the policy's rules decide again
	return c.Due(now)
}

// Hold records a received data packet that completed a message (see
// Config.CompleteDelay) and holds the pending ACK until now + CompleteDelay, or until an
// earlier deadline of packets already waiting, whichever comes first; it reports whether
// the ACK is due now. Without CompleteDelay, or when the ACK was due already (the packets
// before it are owed an ACK now), it is OnDataBytes with urgent set.
func (c *Coalescer) Hold(now int64, ce bool, ev uint16, n int) bool {
	if c.cfg.CompleteDelay <= 0 || c.Due(now) {
		return c.OnDataBytes(now, ce, ev, n, true)
	}
	until := now + int64(c.cfg.CompleteDelay)
	if d, ok := c.Deadline(); ok {
		until = min(until, d) // never later than the packets already waiting were due
	}
	c.OnDataBytes(now, ce, ev, n, false)
	c.holdUntil = until
	return c.Due(now)
}

// Held reports whether the pending ACK is held for an outgoing data packet (Hold).
func (c *Coalescer) Held() bool { return c.holdUntil > 0 && c.pending > 0 && !c.urgent }

// Due reports whether the pending ACK must go now.
func (c *Coalescer) Due(now int64) bool {
	if c.pending == 0 {
		return false
	}
	if c.holdUntil > 0 && !c.urgent {
		return now >= c.holdUntil || c.overfull()
	}
	return c.urgent || c.full() || now-c.firstAt >= int64(c.cfg.MaxDelay)
}

// full reports whether Every packets or EveryBytes bytes are pending.
func (c *Coalescer) full() bool {
	return c.pending >= c.cfg.Every || c.cfg.EveryBytes > 0 && c.bytes >= c.cfg.EveryBytes
}

// overfull reports whether more than Every packets or EveryBytes bytes are pending: a
// held ACK waits for one answer, not for a stream of messages (with Every = 1 the second
// packet ends the hold).
func (c *Coalescer) overfull() bool {
	return c.pending > c.cfg.Every || c.cfg.EveryBytes > 0 && c.bytes > c.cfg.EveryBytes
}

// Pending reports whether any received packet is still unacknowledged.
func (c *Coalescer) Pending() bool { return c.pending > 0 }

// Deadline returns when the pending ACK is due at the latest, and false if none is pending.
func (c *Coalescer) Deadline() (int64, bool) {
	if c.pending == 0 {
		return 0, false
	}
	if c.Held() && !c.overfull() {
		return c.holdUntil, true
	}
	if c.urgent || c.full() {
		return c.firstAt, true
	}
	return c.firstAt + int64(c.cfg.MaxDelay), true
}

// Take fills the coalescing fields of an ACK (packet and CE counts, clean EVs and the
// matching flag) and starts a new interval.
func (c *Coalescer) Take(p *wire.Packet) {
	p.Ack.PktCount = uint16(min(c.pending, 0xffff))
	p.Ack.CECount = uint16(min(c.ce, 0xffff))
	p.Ack.NumClean = uint8(c.nclean)
	copy(p.Ack.CleanEVs[:c.nclean], c.clean[:c.nclean])
	if c.nclean > 0 {
		p.Flags |= wire.FlagCleanEV
	} else {
		p.Flags &^= wire.FlagCleanEV // a reused packet may carry it from a previous ACK
	}
	c.pending, c.bytes, c.ce, c.nclean, c.urgent, c.holdUntil = 0, 0, 0, 0, false, 0
}
