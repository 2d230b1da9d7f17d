package transport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/smartt-transport/smartt/ackpath"
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/bbr"
	"github.com/smartt-transport/smartt/cc/dcqcn"
	"github.com/smartt-transport/smartt/cc/dctcp"
	"github.com/smartt-transport/smartt/cc/eqds"
	"github.com/smartt-transport/smartt/cc/fixedrate"
	"github.com/smartt-transport/smartt/cc/hpcc"
	"github.com/smartt-transport/smartt/cc/nscc"
	"github.com/smartt-transport/smartt/cc/rlcc"
	"github.com/smartt-transport/smartt/cc/smartt"
	"github.com/smartt-transport/smartt/cc/swift"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/reps"
	"github.com/smartt-transport/smartt/transport/seal"
	"github.com/smartt-transport/smartt/transport/wire"
)

// Config configures an Endpoint. Start from DefaultConfig and change what you need.
type Config struct {
	// MTU is the payload carried by one data packet, in bytes (header excluded).
	MTU int `yaml:"mtu" unit:"bytes"`
	// MaxMessage is the largest message accepted from the application or a peer.
	MaxMessage int `yaml:"max_message" unit:"bytes"`
	// RecvWindow is the flow-control window in bytes: the messages a peer has open here
	// beyond the delivered point may claim at most this many bytes of stream in total,
	// except that the next message in delivery order may always be received whole.
	RecvWindow int `yaml:"recv_window" unit:"bytes"`
	// RecvBudget caps the bytes the endpoint holds for all peers' messages together,
	// each buffer at its capacity and each open message's record included
	// (Stats.RecvBuffered; one message may finish beyond it). Buffers are allocated as
	// data arrives (RecvChunk at a time, small ones in size classes), so a peer holds
	// only what it sent; data that would need memory beyond the budget is dropped
	// unacknowledged (Stats.RecvBudgetDrops), so that its sender backs off and resends.
	RecvBudget int64 `yaml:"recv_budget" unit:"bytes"`
	// PSNWindow is how many PSNs may be outstanding (sender) or tracked (receiver); a
	// power of two >= 256.
	PSNWindow int `yaml:"psn_window"`
	// ReorderThreshold declares a packet lost once a packet sent this many transmissions
	// later has been acknowledged (SACK-gap detection; see docs/engine.md).
	ReorderThreshold int `yaml:"reorder_threshold"`
	// InitialRTO is the retransmission timeout before any RTT sample, ns (YAML: "200us").
	InitialRTO config.Duration `yaml:"initial_rto"`
	// MinRTO is the floor of the retransmission timeout, ns (YAML: "200us").
	MinRTO config.Duration `yaml:"min_rto"`
	// MaxRTO caps the backed-off retransmission timeout, ns (YAML: "200us").
	MaxRTO config.Duration `yaml:"max_rto"`
	// FixedRTO, if > 0, is the retransmission timeout, ns (YAML: "50us"): constant, with
	// no RTT estimate and no backoff, as the papers' simulator (htsim) uses it; each
	// in-flight packet still times out that long after its latest transmission, so the
	// timer runs from the oldest unacknowledged one. 0 (default): srtt + max(MinRTO,
	// 4 rttvar), doubled per timed-out retransmission up to MaxRTO.
	FixedRTO config.Duration `yaml:"fixed_rto"`
	// MaxRetransmits fails a message (and aborts its connection) when one of its packets
	// would be sent for the MaxRetransmits+1-th time without a NACK having answered the
	// earlier ones: transmissions lost silently (timeouts, SACK gaps) are what say the
	// path or the peer may be dead.
	MaxRetransmits int `yaml:"max_retransmits"`
	// MaxTrims bounds the retransmissions of one packet that a NACK asked for (its earlier
	// copy was trimmed): a NACK proves the peer and the path alive, so trims under
	// congestion do not count towards MaxRetransmits; a packet trimmed more often than
	// this fails its message all the same, so that no peer or path can keep a sender
	// retransmitting forever.
	MaxTrims int `yaml:"max_trims"`
	// IdleTimeout aborts a connection whose peer acknowledged nothing for this long while
	// data was outstanding, or sent nothing for this long while a message from it was
	// partly received; an idle accepted connection is forgotten after it, an idle dialled
	// one after half of it (so the dialler re-dials before the peer forgets), ns (YAML: "5s").
	IdleTimeout config.Duration `yaml:"idle_timeout"`
	// UnprovenTimeout forgets an accepted connection whose peer has not yet proven its
	// address (echoed our connection ID) after this long without a packet; such
	// connections are also the first evicted when MaxConns is reached, ns (YAML: "1s").
	UnprovenTimeout config.Duration `yaml:"unproven_timeout"`
	// TimeWait is how long a closed connection's identity is remembered so that late
	// packets cannot resurrect it, ns (YAML: "200us").
	TimeWait config.Duration `yaml:"time_wait"`
	// CloseRetries is how many times a CLOSE is resent before the connection is dropped.
	CloseRetries int `yaml:"close_retries"`
	// MaxConns bounds the live connections of the endpoint; peers beyond it get a RESET.
	MaxConns int `yaml:"max_conns"`
	// MaxTimeWait bounds the TIME_WAIT entries of the endpoint beyond MaxConns: live
	// connections plus entries stay within MaxConns+MaxTimeWait (new connections are
	// refused, never entries evicted), and those of unproven peers within
	// MaxConns+MaxTimeWait/8 (docs/engine.md, "TIME_WAIT").
	MaxTimeWait int `yaml:"max_time_wait"`
	// Unordered delivers each message as soon as it is complete instead of in send order.
	Unordered bool `yaml:"unordered"`
	// HopsFromTTL learns each connection's path length from the IP TTL (hop limit) of its
	// peer's packets (RxMeta.TTL; the fewest hops seen) and gives it to the controller as
	// SetPathHops does: per-hop base RTTs (smartt.base_rtt_per_hop), Swift's hop-scaled
	// target. Only packets of proven connections count, so a spoofed packet cannot shorten it.
	HopsFromTTL bool `yaml:"hops_from_ttl"`
	// Trimming says the network's switches trim packets that find a full queue (cut to
	// the header and forwarded, so the receiver NACKs them). Congestion control and load
	// balancing read losses by it: with trimming, a timeout means failure, not congestion.
	Trimming bool `yaml:"trimming"`
	// TrimDSCP is the DSCP code point switches put on trimmed packets (0: none configured).
	TrimDSCP uint8 `yaml:"trim_dscp"`
	// ReturnToSender: the network's switches send a trimmed packet's header back to its
	// sender (rts.go). Off, returned headers are dropped unread (Stats.ReturnedIgnored):
	// anyone can send one. Needs Trimming.
	ReturnToSender bool `yaml:"return_to_sender"`
	// ListenPort is written into every packet as the port replies go to (0: the source port).
	ListenPort uint16 `yaml:"listen_port"`
	// EVS is the number of usable entropy values (1..65536).
	EVS int `yaml:"evs"`
	// Ack is the receiver's ACK policy.
	Ack ackpath.Config `yaml:"ack"`
	// Recovery selects the loss-recovery scheme (recovery.go, docs/engine.md "Loss
	// recovery"): sack (default), dupack, subflows, gobackn or ec.
	Recovery RecoveryConfig `yaml:"recovery"`
	// LinkRate is the host's link rate in bits/s, from which congestion control derives
	// the bandwidth-delay product.
	LinkRate config.Rate `yaml:"link_rate"`
	// BaseRTT is the RTT of an empty network path, ns (congestion control's reference).
	BaseRTT config.Duration `yaml:"base_rtt"`
	// CC names the congestion controller of new connections (see CCNames).
	CC string `yaml:"cc"`
	// LB names the load balancer of new connections (see LBNames).
	LB string `yaml:"lb"`
	// REPS configures the load balancers (REPS and the baselines).
	REPS reps.Config `yaml:"reps"`
	// InitialWindow is the congestion window of the fixed-window controller, bytes.
	InitialWindow int `yaml:"initial_window" unit:"bytes"`
	// RLCC configures the rlcc controller (cc/rlcc).
	RLCC rlcc.Config `yaml:"rlcc"`
	// PacingBurst is the pacer's token-bucket depth in bytes (pacing.Pacer.Burst): a
	// connection the driver serves late may send this much ahead of strict spacing to
	// keep its average rate. 0 (default, the simulator's choice) is strict EDT; the
	// daemon should use a few MTUs (docs/pacing.md).
	PacingBurst int `yaml:"pacing_burst" unit:"bytes"`
	// Profile names a hardware profile (hwprofile.Names) the configured CC and LB must fit:
	// NewEndpoint refuses them if they exceed its memory budgets or need floating point.
	Profile string `yaml:"profile"`
	// SMaRTT holds the parameters of the "smartt" controller (docs/smartt.md).
	SMaRTT smartt.Config `yaml:"smartt"`
	// Auth configures packet authentication and encryption (transport/seal, docs/security.md).
	Auth seal.Config `yaml:"auth"`

	// Baseline congestion controllers (docs/cc.md): one block each.

	// DCTCP holds the parameters of the "dctcp" controller (cc/dctcp).
	DCTCP dctcp.Config `yaml:"dctcp"`
	// MPRDMA holds the parameters of the "mprdma" controller (cc/dctcp, per-ACK ECN).
	MPRDMA dctcp.Config `yaml:"mprdma"`
	// Swift holds the parameters of the "swift" controller (cc/swift).
	Swift swift.Config `yaml:"swift"`
	// NSCC holds the parameters of the "nscc" controller (cc/nscc).
	NSCC nscc.Config `yaml:"nscc"`
	// DCQCN holds the parameters of the "dcqcn" controller (cc/dcqcn).
	DCQCN dcqcn.Config `yaml:"dcqcn"`
	// BBR holds the parameters of the "bbr" controller (cc/bbr).
	BBR bbr.Config `yaml:"bbr"`
	// EQDS holds the parameters of the "eqds" mode (cc/eqds, receiver-driven credit).
	EQDS eqds.Config `yaml:"eqds"`
	// HPCC holds the parameters of the "hpcc" controller (cc/hpcc; needs INT).
	HPCC hpcc.Config `yaml:"hpcc"`
	// FixedRate holds the parameters of the "fixed_rate" controller (cc/fixedrate).
	FixedRate fixedrate.Config `yaml:"fixed_rate"`

	// INT says the network's switches stamp in-band telemetry (HPCC's per-hop records,
	// docs/wire.md "INT"): data packets then reserve INTHops record slots, and the
	// receiver echoes the records in its ACKs. Controllers that need it (hpcc) are
	// refused without it.
	INT bool `yaml:"int"`
	// INTHops is the number of record slots a data packet reserves (1..5; 0: 5, HPCC's
	// maximum): switches beyond it on a path are not recorded.
	INTHops int `yaml:"int_hops"`
}

// intLen is the INT block a data packet carries (0 without INT).
func (c *Config) intLen() int {
	if !c.INT {
		return 0
	}
	return wire.INTLen(c.intHops())
}

// intHops is the INT record slots a data packet reserves.
func (c *Config) intHops() int {
	if c.INTHops == 0 {
		return wire.MaxINTHops
	}
	return c.INTHops
}

// completeDelay is ack.complete_delay as the engine applies it: at most half the RTO floor
// (fixed_rto when set, else min_rto), so that a held ACK comes back well inside the
// sender's retransmission timer whatever the RTO settings (a config that lowers min_rto
// need not lower complete_delay too).
func (c *Config) completeDelay() config.Duration {
	floor := c.MinRTO
	if c.FixedRTO != 0 {
		floor = c.FixedRTO
	}
	return min(c.Ack.CompleteDelay, floor/2)
}

// MaxMTU is the largest payload per packet: the largest IPv4 UDP payload (65,507 bytes)
// minus the DATA header.
const MaxMTU = 65507 - wire.DataHdrLen

// BufferPool supplies the buffers incoming messages are reassembled into. The engine
// hands a buffer to the application inside a MessageReceived event and never touches it
// again; buffers of messages that fail are returned with Put.
type BufferPool interface {
	Get(n int) []byte
	Put(b []byte)
}

// Placer lets the application receive large messages straight into memory of its own (the
// daemon: a client session's shared-memory receive ring), so that delivery copies
// nothing. The engine asks once per message, when its offset-0 packet arrives (so head,
// that packet's payload, holds the message's start), for messages of at least PlaceMin
// bytes from peers that have proven their address; what arrived before is copied over.
// The engine only writes the message's bytes into the buffer and never reads them back
// (but to rebuild erasure-coded blocks), and hands it over in the MessageReceived event
// (Event.Data, Event.Placed = tok) or, if the message is never delivered, calls Unplace.
// Both methods are called with the engine's lock held: they must not call back into it.
type Placer interface {
	// Place returns a buffer of n bytes for the message and a non-zero token for it, or
	// a zero token to leave the message in the engine's own buffers.
	Place(peer netip.AddrPort, n int, head []byte) (buf []byte, tok uint64)
	// Unplace ends a placement whose message will not be delivered (its connection
	// failed or went away): the engine writes into the buffer no more.
	Unplace(tok uint64)
}

// PlaceMin is the smallest message the engine offers to a Placer.
const PlaceMin = 64 << 10

// WholeBufferPool is a BufferPool whose memory does not grow with the buffers it hands
// out (the simulator's, which never reads contents): the engine then takes each message's
// buffer whole on its first packet instead of RecvChunk at a time, and copies nothing.
type WholeBufferPool interface {
	BufferPool
	// Whole reports that whole-message buffers cost nothing to hold.
	Whole() bool
}

// RecvChunk is the unit in which a large incoming message's buffer is allocated as its
// data arrives; a message of at most RecvChunk bytes gets one buffer of its size.
const RecvChunk = 16 << 10

type heapBuffers struct{}

func (heapBuffers) Get(n int) []byte { return make([]byte, n) }
func (heapBuffers) Put([]byte)       {}

// DefaultConfig returns the defaults documented in docs/engine.md.
func DefaultConfig() Config {
	return Config{
		MTU:              4096,
		MaxMessage:       1 << 30,
		RecvWindow:       64 << 20,
		RecvBudget:       2 << 30,
		PSNWindow:        4096,
		ReorderThreshold: 32,
		InitialRTO:       1_000_000,
		MinRTO:           200_000,
		MaxRTO:           200_000_000,
		MaxRetransmits:   15,
		MaxTrims:         1024,
		IdleTimeout:      5_000_000_000,
		UnprovenTimeout:  1_000_000_000,
		TimeWait:         2_000_000_000,
		CloseRetries:     8,
		MaxConns:         4096,
		MaxTimeWait:      65536,
		EVS:              256,
		Trimming:         true,
		Ack:              ackpath.DefaultConfig(),
		LinkRate:         100_000_000_000,
		BaseRTT:          12_000,
		CC:               "smartt",
		LB:               "reps",
		REPS:             reps.DefaultConfig(),
		InitialWindow:    256 << 10,
		RLCC:             rlcc.DefaultConfig(),
		SMaRTT:           smartt.DefaultConfig(),
		Auth:             seal.DefaultConfig(),
		// Baseline congestion controllers (docs/cc.md).
		DCTCP:  dctcp.DefaultConfig(),
		MPRDMA: dctcp.DefaultConfig(),
		Swift:  swift.DefaultConfig(),
		NSCC:   nscc.DefaultConfig(),
		DCQCN:  dcqcn.DefaultConfig(),
		BBR:    bbr.DefaultConfig(),
		EQDS:   eqds.DefaultConfig(),

		HPCC:      hpcc.DefaultConfig(),
		FixedRate: fixedrate.DefaultConfig(),
	}
}

// Validate checks every field and names the offending one with its allowed range.
func (c *Config) Validate() error {
	_, err := c.validate(&Hooks{})
	return err
}

// prepared are the per-connection constructors Validate derived (nil where the caller
// gave its own), so NewEndpoint runs each Prepare once.
type prepared struct {
	newCC func() cc.Controller
	newLB func(rng *rand.Rand) reps.Balancer
}

// validate is Validate returning what it prepared.
func (c *Config) validate(h *Hooks) (prepared, error) {
	var p prepared
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.MTU < 64 || c.MTU > MaxMTU {
		bad("mtu = %d: must be in 64..%d bytes", c.MTU, MaxMTU)
	}
	if c.MaxMessage < 1 || int64(c.MaxMessage) > 1<<32-1 {
		bad("max_message = %d: must be in 1..%d bytes", c.MaxMessage, int64(1<<32-1))
	}
	if c.RecvWindow < c.MTU || int64(c.RecvWindow) > 1<<32-1 {
		bad("recv_window = %d: must be in mtu..%d bytes", c.RecvWindow, int64(1<<32-1))
	}
	if c.RecvBudget < int64(c.MaxMessage) || c.RecvBudget > 1<<40 {
		bad("recv_budget = %d: must be in max_message (%d)..%d bytes (a message of max_message bytes must fit)", c.RecvBudget, c.MaxMessage, int64(1<<40))
	}
	if c.PSNWindow < 256 || c.PSNWindow > 1<<24 || c.PSNWindow&(c.PSNWindow-1) != 0 {
		bad("psn_window = %d: must be a power of two in 256..%d", c.PSNWindow, 1<<24)
	}
	if c.ReorderThreshold < 1 {
		bad("reorder_threshold = %d: must be >= 1", c.ReorderThreshold)
	}
	const minRTOFloor, minRTOCeil, maxRTOCeil config.Duration = 1_000, 10_000_000_000, 60_000_000_000 // 1us, 10s, 60s
	if c.MinRTO < minRTOFloor || c.MinRTO > minRTOCeil {
		bad("min_rto = %v: must be in 1us..10s", c.MinRTO)
	} else if c.MaxRTO < c.MinRTO || c.MaxRTO > maxRTOCeil {
		bad("max_rto = %v: must be in min_rto (%v)..60s", c.MaxRTO, c.MinRTO)
	} else if c.InitialRTO < c.MinRTO || c.InitialRTO > c.MaxRTO {
		bad("initial_rto = %v: must be in min_rto (%v)..max_rto (%v)", c.InitialRTO, c.MinRTO, c.MaxRTO)
	}
	if c.FixedRTO != 0 && (c.FixedRTO < minRTOFloor || c.FixedRTO > minRTOCeil) {
		bad("fixed_rto = %v: must be 0 (adaptive) or in 1us..10s", c.FixedRTO)
	}
	if c.MaxRetransmits < 1 || c.MaxRetransmits > 255 {
		bad("max_retransmits = %d: must be in 1..255", c.MaxRetransmits)
	}
	if c.MaxTrims < 1 || c.MaxTrims > 60000 {
		bad("max_trims = %d: must be in 1..60000 (with max_retransmits, a packet's copies fit 16 bits)", c.MaxTrims)
	}
	if c.IdleTimeout < 1_000_000 || c.IdleTimeout > 86_400_000_000_000 {
		bad("idle_timeout = %v: must be in 1ms..24h", c.IdleTimeout)
	}
	if c.UnprovenTimeout < 1_000_000 || c.UnprovenTimeout > c.IdleTimeout {
		bad("unproven_timeout = %v: must be in 1ms..idle_timeout (%v)", c.UnprovenTimeout, c.IdleTimeout)
	}
	if c.TimeWait < 0 || c.TimeWait > 600_000_000_000 {
		bad("time_wait = %v: must be in 0..10m", c.TimeWait)
	}
	if c.MaxConns < 1 || c.MaxConns > 1<<20 {
		bad("max_conns = %d: must be in 1..%d", c.MaxConns, 1<<20)
	}
	if c.MaxTimeWait < unprovenShare || c.MaxTimeWait > 1<<24 {
		bad("max_time_wait = %d: must be in %d..%d", c.MaxTimeWait, unprovenShare, 1<<24)
	}
	if c.CloseRetries < 1 {
		bad("close_retries = %d: must be >= 1", c.CloseRetries)
	}
	if c.ReturnToSender && !c.Trimming {
		bad("return_to_sender = true needs trimming = true: switches return the headers of packets they trim")
	}
	if c.TrimDSCP > 63 {
		bad("trim_dscp = %d: must be in 0..63", c.TrimDSCP)
	}
	if err := wire.CheckEVS(c.EVS); err != nil {
		bad("%v", err)
	}
	if c.PacingBurst < 0 || c.PacingBurst > 1<<30 {
		bad("pacing_burst = %d: must be in 0..%d bytes", c.PacingBurst, 1<<30)
	}
	if c.INTHops < 0 || c.INTHops > wire.MaxINTHops {
		bad("int_hops = %d: must be in 1..%d (0: %d)", c.INTHops, wire.MaxINTHops, wire.MaxINTHops)
	} else if c.INT && c.MTU+c.intLen() > MaxMTU {
		bad("mtu = %d: must be in 64..%d bytes with int = true (the %d-byte INT block must fit the datagram)",
			c.MTU, MaxMTU-c.intLen(), c.intLen())
	}
	if c.INT && c.Auth.Enabled() {
		bad("int = true with auth.mode = %v: switches write INT records into the packets, which would break their seal", c.Auth.Mode)
	}
	if c.InitialWindow < c.MTU {
		bad("initial_window = %d: must be >= mtu (%d)", c.InitialWindow, c.MTU)
	}
	// The network parameters and the controller's derive from the fields above: checked
	// only once those are valid, so that one bad field gives one error.
	derivedOK := len(errs) == 0
	if derivedOK {
		if err := c.Network().Validate(); err != nil {
			errs, derivedOK = append(errs, err), false
		}
	}
	if err := c.REPS.Validate(c.EVS); err != nil {
		errs = append(errs, err)
	}
	if err := c.Ack.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Recovery.validate(c); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.authErrors())
	var err error
	if h.NewCC == nil && derivedOK {
		if p.newCC, err = c.prepareCC(); err != nil {
			errs = append(errs, err)
		}
	}
	if h.NewBalancer == nil && derivedOK {
		if p.newLB, err = c.prepareLB(); err != nil {
			errs = append(errs, err)
		}
	}
	return p, errors.Join(errs...)
}
