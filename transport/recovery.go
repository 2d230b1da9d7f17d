package transport

import (
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/transport/wire"
)

// Loss-recovery modes (Config.Recovery.Mode, YAML transport.recovery.mode; issue 17, the
// schemes the AI-training load-balancing study compares, docs/engine.md "Loss recovery").
const (
	// RecoverySACK is the default: SACK gap (ReorderThreshold transmissions) + RTO +
	// trimming NACKs.
	RecoverySACK = "sack"
	// RecoveryDupAck is TCP-like: a packet is lost once Recovery.DupThresh packets sent
	// after it were acknowledged (the SACK-gap rule with the dupACK threshold) + RTO.
	RecoveryDupAck = "dupack"
	// RecoverySubflows is dupACK recovery per subflow (reordering-safe): the transmission
	// on EV e belongs to subflow e mod Subflows, and the dupACK rule counts only later
	// transmissions of the same subflow.
	RecoverySubflows = "subflows"
	// RecoveryGoBackN is RoCE-like: the receiver NACKs the first gap and drops
	// out-of-order data; the sender resends everything from the NACKed PSN on.
	RecoveryGoBackN = "gobackn"
	// RecoveryEC is erasure coding: blocks of K data packets are followed by M parity
	// packets; the receiver rebuilds up to M lost packets of a block.
	RecoveryEC = "ec"
)

// RecoveryModes lists the valid values of Recovery.Mode.
var RecoveryModes = []string{RecoverySACK, RecoveryDupAck, RecoverySubflows, RecoveryGoBackN, RecoveryEC}

// MaxSubflows bounds Recovery.Subflows (per-subflow state is kept per connection).
const MaxSubflows = 64

// EC limits: K data packets per block are named in a byte of the parity header, M parity
// packets per block in a nibble (docs/wire.md "Erasure coding").
const (
	MaxECData   = 255
	MaxECParity = 16
)

// RecoveryConfig selects and parameterises the loss-recovery scheme.
type RecoveryConfig struct {
	// Mode is one of RecoveryModes ("" means "sack").
	Mode string `yaml:"mode"`
	// DupThresh is the dupACK threshold of "dupack" and "subflows": a packet is lost once
	// this many packets sent after it (in its subflow) were acknowledged. 0: 3.
	DupThresh int `yaml:"dup_thresh"`
	// Subflows is the subflow count of "subflows"; 0 derives it from the paper's Eq. 1
	// with Hops, QueueBytes, FlowsPerHost, DupThresh and the MTU (SubflowCount).
	Subflows int `yaml:"subflows"`
	// Hops is the most queues two packets of a flow can meet on different paths (h in
	// Eq. 1; 4 on a 3-tier fat tree). 0: 4.
	Hops int `yaml:"hops"`
	// QueueBytes is the per-port queue size (Q in Eq. 1). 0: 32 KiB (the paper's default).
	QueueBytes int `yaml:"queue_bytes"`
	// FlowsPerHost is the number of concurrent flows sharing the host's link (the flow's
	// rate is link rate / FlowsPerHost in Eq. 1). 0: 1.
	FlowsPerHost int `yaml:"flows_per_host"`
	// K is the data packets per coded block of "ec". 0: derived from Overhead.
	K int `yaml:"k"`
	// M is the parity packets per coded block of "ec". 0: 1.
	M int `yaml:"m"`
	// Overhead is the parity fraction of "ec" when K is 0: K = round(M / Overhead).
	// 0: 0.05 (the paper's 5 %).
	Overhead float64 `yaml:"overhead"`
}

// mode returns the mode with the default applied.
func (r *RecoveryConfig) mode() string {
	if r.Mode == "" {
		return RecoverySACK
	}
	return r.Mode
}

func (r *RecoveryConfig) dupThresh() int {
	if r.DupThresh == 0 {
		return 3
	}
	return r.DupThresh
}

func (r *RecoveryConfig) ecM() int {
	if r.M == 0 {
		return 1
	}
	return r.M
}

func (r *RecoveryConfig) ecK() int {
	if r.K != 0 {
		return r.K
	}
	ov := r.Overhead
	if ov == 0 {
		ov = 0.05
	}
	k := int(math.Round(float64(r.ecM()) / ov))
	return min(max(k, 1), MaxECData)
}

// SubflowCount is the paper's Eq. 1 (the AI-training load-balancing study, section 7): a
// packet delayed by the largest queueing difference between two paths, h x Q / B, lets
// h x Q / B x r / s later packets of its (sub)flow arrive first (r the (sub)flow's rate,
// s the packet size), and a flow sharing the link with f - 1 others and split into n
// subflows has r = B / (f n). Reordering cannot trigger a dupACK threshold t when
// h Q / (s f n) < t, so n = floor(h Q / (s f t)) + 1: 11 for h = 4, Q = 32 KiB, s = 4 KiB,
// f = 1, t = 3 (the paper's figure), 6 for t = 6. An explicit Subflows wins; the result
// is within 1..min(MaxSubflows, evs).
func (c *Config) SubflowCount() int {
	r := &c.Recovery
	if r.Subflows > 0 {
		return min(r.Subflows, c.EVS)
	}
	h, q, f := r.Hops, r.QueueBytes, r.FlowsPerHost
	if h == 0 {
		h = 4
	}
	if q == 0 {
		q = 32 << 10
	}
	if f == 0 {
		f = 1
	}
	n := h*q/(c.MTU*f*r.dupThresh()) + 1
	return min(max(n, 1), MaxSubflows, c.EVS)
}

// ECBlock returns the EC block shape (data, parity packets per block) of "ec".
func (c *Config) ECBlock() (k, m int) { return c.Recovery.ecK(), c.Recovery.ecM() }

// reorderThreshold is the SACK-gap threshold in transmissions the mode uses (also the
// receiver's "hole old enough" immediate-ACK rule).
func (c *Config) reorderThreshold() int {
	switch c.Recovery.mode() {
	case RecoveryDupAck, RecoverySubflows:
		return c.Recovery.dupThresh()
	case RecoveryEC:
		// A data packet may be rebuilt from the block's parity, which leaves after the
		// block's last data packet: judge it against packets beyond the block.
		k, m := c.ECBlock()
		return c.ReorderThreshold + k + m
	}
	return c.ReorderThreshold
}

// validate checks the recovery block; errors name the YAML key.
func (r *RecoveryConfig) validate(c *Config) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch r.mode() {
	case RecoverySACK, RecoveryDupAck, RecoverySubflows, RecoveryGoBackN, RecoveryEC:
	default:
		bad("recovery.mode = %q: must be one of %q", r.Mode, RecoveryModes)
	}
	if r.DupThresh < 0 || r.DupThresh > 1024 {
		bad("recovery.dup_thresh = %d: must be in 1..1024 (0: 3)", r.DupThresh)
	}
	if r.Subflows < 0 || r.Subflows > MaxSubflows {
		bad("recovery.subflows = %d: must be in 1..%d (0: from Eq. 1)", r.Subflows, MaxSubflows)
	}
	if r.Hops < 0 || r.Hops > 64 {
		bad("recovery.hops = %d: must be in 1..64 (0: 4)", r.Hops)
	}
	if r.QueueBytes < 0 || r.QueueBytes > 1<<30 {
		bad("recovery.queue_bytes = %d: must be in 1..%d (0: 32 KiB)", r.QueueBytes, 1<<30)
	}
	if r.FlowsPerHost < 0 || r.FlowsPerHost > 1<<20 {
		bad("recovery.flows_per_host = %d: must be in 1..%d (0: 1)", r.FlowsPerHost, 1<<20)
	}
	if r.K < 0 || r.K > MaxECData {
		bad("recovery.k = %d: must be in 1..%d (0: from recovery.overhead)", r.K, MaxECData)
	}
	if r.M < 0 || r.M > MaxECParity {
		bad("recovery.m = %d: must be in 1..%d (0: 1)", r.M, MaxECParity)
	}
	if r.Overhead != 0 && !(r.Overhead >= 0.001 && r.Overhead <= 1) {
		bad("recovery.overhead = %v: must be in 0.001..1 (0: 0.05)", r.Overhead)
	}
	if r.mode() == RecoveryEC && len(errs) == 0 {
		if k, m := c.ECBlock(); k+m > 256 {
			bad("recovery.k + recovery.m = %d: must be at most 256 (Reed-Solomon over GF(2^8))", k+m)
		}
	}
	return errors.Join(errs...)
}

// Recovery modes as the engine keeps them.
const (
	recSACK uint8 = iota
	recDupAck
	recSubflows
	recGoBackN
	recEC
)

// recoveryParams returns the mode, the SACK-gap threshold and the subflow count.
func (c *Config) recoveryParams() (mode uint8, thr, nsub int) {
	thr, nsub = c.reorderThreshold(), 1
	switch c.Recovery.mode() {
	case RecoveryDupAck:
		mode = recDupAck
	case RecoverySubflows:
		mode, nsub = recSubflows, c.SubflowCount()
	case RecoveryGoBackN:
		mode = recGoBackN
	case RecoveryEC:
		mode = recEC
	}
	return mode, thr, nsub
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
			if sp.state != pktInflight || sp.seq != t.seq || !wire.SeqLess(t.psn, c.sndNxt) ||
				!wire.SeqLEQ(c.sndUna, t.psn) {
				f.timeq.pop() // acknowledged, or resent (then queued in its new subflow)
				continue
			}
			if int32(f.maxAcked-sp.sseq) < thr {
				break
			}
			f.timeq.pop()
			e.declareLost(now, c, t.psn, cc.LossSack)
		}
	}
}

// goBack declares every packet in flight from psn on lost (recovery "gobackn") and puts
// the retransmission queue in PSN order: the receiver takes nothing but the next PSN, so
// a resend that overtook an earlier one would only be dropped (and with a window of one
// packet, each such resend cost a timeout).
func (e *Endpoint) goBack(now int64, c *conn, psn uint32, cause, why cc.LossCause) {
	for q := psn; wire.SeqLess(q, c.sndNxt); q++ {
		if c.pkts[q&c.mask].state == pktInflight {
			e.declareLostAs(now, c, q, cause, why)
		}
	}
	c.retxq.reset()
	for q := c.sndUna; wire.SeqLess(q, c.sndNxt); q++ {
		if c.pkts[q&c.mask].state == pktLost {
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
	if e.rmode != recGoBackN || psn != nk.CumPSN || !wire.SeqLess(psn, c.sndNxt) ||
		nk.EchoTxTime > now || nk.EchoTxTime < c.createdAt {
		e.stats.BadAcks++
		return
	}
	if wire.SeqLess(psn, c.sndUna) {
		e.stats.StaleAcks++
		return
	}
	if sp := &c.pkts[psn&c.mask]; sp.state != pktInflight || sp.sentAt > nk.EchoTxTime {
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
func (e *Endpoint) goBackDrop(now int64, c *conn, p *wire.Packet, m *RxMeta, ce bool) bool {
	d := &p.Data
	cum := c.tracker.Cum()
	trimmed := p.Trimmed() || (e.cfg.TrimDSCP != 0 && m.DSCP == e.cfg.TrimDSCP)
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
		c.nacks.push(nackEntry{goBack: true, psn: cum, ev: p.EV, ce: ce, txTime: d.TxTime, rxTime: m.RxTime})
		c.gbnNacked, c.gbnPSN = true, cum
		e.stats.GoBackNacksSent++
	}
	e.markReady(c)
	return true
}
