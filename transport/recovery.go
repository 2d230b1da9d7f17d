package transport

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/smartt-transport/smartt/transport/wire"
)

// Loss-recovery modes (Config.Recovery.Mode, YAML transport.recovery.mode; issue 17, the
// schemes the AI-training load-balancing study compares, docs/engine.md "Loss recovery").
const (
	// RecoverySACK is the default: SACK gap (ReorderThreshold transmissions) + RTO +
	// trimming NACKs.
	RecoverySACK = "sack"
	// RecoveryEC is erasure coding: blocks of K data packets are followed by M parity
	// packets; the receiver rebuilds up to M lost packets of a block.
	RecoveryEC = "ec"
)

// RecoveryModes lists the valid values of Recovery.Mode, in registration order
// (registerRecovery).
var RecoveryModes []string

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
	if m := lookupRecovery(c.Recovery.mode()); m != nil && m.threshold != nil {
		return m.threshold(c)
	}
	return c.ReorderThreshold
}

// validate checks the recovery block; errors name the YAML key.
func (r *RecoveryConfig) validate(c *Config) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if lookupRecovery(r.mode()) == nil {
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

// recoverer is a loss-recovery mode's part in the engine beside the SACK-gap rule and the
// RTO every mode has. It is resolved once per endpoint (NewEndpoint), as a controller is,
// and is nil for the modes that are the SACK-gap rule alone ("sack", "dupack"): the hot
// path pays one nil check. A mode is a file with its recoverer and a registerRecovery call.
type recoverer interface {
	// newConn sets up a connection's per-mode state.
	newConn(c *conn)
	// rxData sees data packet d (on EV ev, trimmed or not, arrived at rxTime) before
	// the receiver records it (the PSN tracker is set up); true: the mode consumed it.
	// Hooks take the packet's fields, not the packet: an interface call's arguments
	// escape, and a pointer to the datagram would move it to the heap.
	rxData(now int64, c *conn, d *wire.Data, ev uint16, trimmed, ce bool, rxTime int64) bool
	// trimNack takes the NACK nk of trimmed data packet d (not yet held; retx: a
	// retransmission); false: the default, NACK it now.
	trimNack(c *conn, d *wire.Data, retx bool, nk nackEntry) bool
	// rxPlaced: data packet d's new bytes were placed in message r.
	rxPlaced(r *rxMsg, d *wire.Data)
	// sent: transmission sp of psn is leaving.
	sent(c *conn, psn uint32, sp *sentPkt)
	// timedOut: psn timed out and was declared lost.
	timedOut(now int64, c *conn, psn uint32)
	// detectLoss runs after an ACK was applied; false: the SACK-gap rule runs.
	detectLoss(now int64, c *conn) bool
}

// baseRecovery is a recoverer that changes nothing, for modes to embed and override.
type baseRecovery struct{}

func (baseRecovery) newConn(*conn) {}
func (baseRecovery) rxData(int64, *conn, *wire.Data, uint16, bool, bool, int64) bool {
	return false
}
func (baseRecovery) trimNack(*conn, *wire.Data, bool, nackEntry) bool { return false }
func (baseRecovery) rxPlaced(*rxMsg, *wire.Data)                      {}
func (baseRecovery) sent(*conn, uint32, *sentPkt)                     {}
func (baseRecovery) timedOut(int64, *conn, uint32)                    {}
func (baseRecovery) detectLoss(int64, *conn) bool                     { return false }

// recoveryMode is one registered loss-recovery mode.
type recoveryMode struct {
	name string
	// threshold is the SACK-gap threshold in transmissions (nil: ReorderThreshold).
	threshold func(c *Config) int
	// subflows is the per-connection subflow count (nil: 1); the ledger charges them.
	subflows func(c *Config) int
	// new returns the mode's recoverer for endpoint e, whose configuration is final (nil
	// func or nil result: the SACK-gap rule alone). A recoverer keeps e: hooks that took
	// it as an argument would make the compiler move whatever e points to, datagrams
	// decoded into e.pkt included, to the heap.
	new func(e *Endpoint) recoverer
}

var recoveryRegistry []recoveryMode

// registerRecovery adds a mode (called from the mode's file's init); a name twice panics.
func registerRecovery(m recoveryMode) {
	if m.name == "" || lookupRecovery(m.name) != nil {
		panic("transport: recovery mode " + strconv.Quote(m.name) + " registered twice or unnamed")
	}
	recoveryRegistry = append(recoveryRegistry, m)
	RecoveryModes = append(RecoveryModes, m.name)
}

// lookupRecovery returns the registered mode called name, or nil.
func lookupRecovery(name string) *recoveryMode {
	for i := range recoveryRegistry {
		if recoveryRegistry[i].name == name {
			return &recoveryRegistry[i]
		}
	}
	return nil
}

// recoveryParams returns the mode, its SACK-gap threshold and subflow count.
func (c *Config) recoveryParams() (m *recoveryMode, thr, nsub int) {
	thr, nsub = c.reorderThreshold(), 1
	m = lookupRecovery(c.Recovery.mode())
	if m != nil && m.subflows != nil {
		nsub = m.subflows(c)
	}
	return m, thr, nsub
}

// newRecoverer returns e's recoverer (nil: the SACK-gap rule alone).
func (m *recoveryMode) newRecoverer(e *Endpoint) recoverer {
	if m == nil || m.new == nil {
		return nil
	}
	return m.new(e)
}

func init() {
	// The default: SACK gap (ReorderThreshold transmissions) + RTO + trimming NACKs,
	// all of it in the core.
	registerRecovery(recoveryMode{name: RecoverySACK})
}
