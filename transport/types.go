package transport

import (
	"errors"
	"fmt"
	"math/bits"
	"net/netip"

	"github.com/smartt-transport/smartt/transport/wire"
)

// ConnID names a connection on its endpoint: the connection's local random 64-bit ID.
type ConnID uint64

// ECN codepoints of the IP header's two low TOS bits.
const (
	NotECT = 0
	ECT1   = 1
	ECT0   = 2
	CE     = 3
)

// RxMeta is what the driver knows about a received datagram beyond its bytes.
type RxMeta struct {
	From   netip.AddrPort // source address and UDP port
	RxTime int64          // kernel receive timestamp, ns on the engine clock; 0: use now
	ECN    uint8          // ECN bits of the IP header
	DSCP   uint8          // DSCP of the IP header
	TTL    uint8          // IP TTL or IPv6 hop limit as received; 0: unknown
}

// Transmit describes a datagram PollTransmit wrote into the caller's buffer.
type Transmit struct {
	N       int            // bytes written
	To      netip.AddrPort // destination
	EV      uint16         // entropy value: the driver maps it to the UDP source port
	ECN     uint8          // ECN codepoint to send with (ECT0 for data, NotECT for control)
	Control bool           // ACK/NACK/probe/close: switches may prioritise it
	Type    wire.Type      // packet type, for drivers and test networks
	// Payload, set only with Endpoint.SetPayloadAlias, is the rest of the datagram after
	// buf[:N]: a data packet's payload, aliasing the message's bytes. It is valid until the
	// next call into the Endpoint other than PollTransmit (which is when a message can
	// complete and its buffer go back to the application), so the driver must send the
	// datagram before it calls HandlePacket, HandleTimeout, Send or PollEvent.
	Payload []byte
}

// EventKind is the kind of an Event.
type EventKind uint8

// Event kinds.
const (
	// MessageReceived: a whole message from the peer; Data is the application's now.
	MessageReceived EventKind = iota + 1
	// MessageSent: the peer delivered message MsgID (every byte acknowledged and, in order,
	// its delivered offset past the message).
	MessageSent
	// MessageFailed: message MsgID will not be delivered; Err says why.
	MessageFailed
	// ConnAccepted: a peer opened a connection to us.
	ConnAccepted
	// ConnClosed: the connection is gone (Err nil for a clean close).
	ConnClosed
)

// String names the event kind.
func (k EventKind) String() string {
	switch k {
	case MessageReceived:
		return "received"
	case MessageSent:
		return "sent"
	case MessageFailed:
		return "failed"
	case ConnAccepted:
		return "accepted"
	case ConnClosed:
		return "closed"
	}
	return "unknown"
}

// Event is something the application must learn about.
type Event struct {
	Kind  EventKind
	Conn  ConnID
	Peer  netip.AddrPort
	MsgID uint32
	Data  []byte // MessageReceived: the message (nil when delivered in Chunks)
	// Chunks is a MessageReceived message in pieces when Hooks.DeliverChunks is set: the
	// engine's receive chunks, in order, all RecvChunk bytes but the last; give them back
	// with PutChunks once done with them (or leave them to the garbage collector).
	Chunks [][]byte
	// Placed is non-zero when a MessageReceived message is in the Hooks.Placer's buffer
	// (Data; the token Place returned for it).
	Placed uint64
	Err    error // MessageFailed, ConnClosed
}

// Errors the engine reports.
var (
	ErrClosed      = errors.New("transport: connection closed")
	ErrUnknownConn = errors.New("transport: unknown connection")
	ErrTooLarge    = errors.New("transport: message larger than max_message")
	ErrEmpty       = errors.New("transport: empty message")
	ErrRetransmits = errors.New("transport: packet retransmitted max_retransmits times without acknowledgement")
	// ErrTrims: one packet was trimmed (and NACKed) more than max_trims times.
	ErrTrims     = errors.New("transport: packet trimmed and resent max_trims times")
	ErrIdle      = errors.New("transport: peer silent for idle_timeout with data outstanding or a message partly received")
	ErrPeerReset = errors.New("transport: peer reset the connection (it holds no state for it)")
	// ErrResetUnsent is ErrPeerReset for a message of which no byte was ever sent: the
	// peer cannot have delivered any of it, so resending it on a new connection is safe.
	// errors.Is(err, ErrPeerReset) holds for it too.
	ErrResetUnsent  = fmt.Errorf("%w before any byte of the message was sent (safe to resend)", ErrPeerReset)
	ErrAborted      = errors.New("transport: connection aborted")
	ErrTimeWaitFull = errors.New("transport: too many closed connections remembered (max_time_wait reached)")
	ErrEvicted      = errors.New("transport: unproven connection evicted to admit another (max_conns reached)")
)

// Stats are the endpoint's counters. All are cumulative.
type Stats struct {
	PacketsSent     uint64 // all packets handed to the driver
	PacketsRecv     uint64 // all datagrams fed in
	DataSent        uint64 // data packets, first transmissions
	BytesSent       uint64 // payload bytes, first transmissions
	RetxSack        uint64 // retransmissions after a SACK gap
	RetxNack        uint64 // retransmissions after a NACK (trimmed packet)
	RetxTimeout     uint64 // retransmissions after a timeout
	AcksSent        uint64
	AcksRecv        uint64
	AcksHeld        uint64 // completions of one-packet messages whose ACK waited for outgoing data (ack.complete_delay)
	AcksRode        uint64 // held ACKs that left ahead of a data packet to their peer, in its batch
	BundlesSent     uint64 // held ACKs that rode inside their answer's datagram (wire.FlagBundle)
	BundlesRecv     uint64 // datagrams received as an ACK with a DATA packet behind it
	MsgsPlaced      uint64 // messages received straight into the Placer's buffers (Hooks.Placer)
	NacksSent       uint64
	NacksRecv       uint64
	ReturnedRecv    uint64 // trimmed headers of our own packets returned by a switch (return-to-sender), acted on as NACKs
	ReturnedBad     uint64 // returned headers dropped: no live connection of ours, wrong peer, or not a PSN in flight
	ReturnedIgnored uint64 // returned headers not acted on: return_to_sender off, or the connection's trust in returns spent
	ReturnedFalse   uint64 // returns acted on whose packet's original transmission was acknowledged after all
	ProbesSent      uint64
	DataRecv        uint64 // data packets received (including duplicates and trimmed)
	DupData         uint64 // duplicate data packets (already received)
	BeyondWindow    uint64 // data packets beyond the PSN or flow-control window (dropped)
	Trimmed         uint64 // trimmed data packets received
	CERecv          uint64 // CE-marked data packets received
	CEEchoed        uint64 // ACKs received that echo a CE mark
	CEReported      uint64 // CE-marked data packets the peer reported in ACKs (sum of CECount)
	INTAcks         uint64 // ACKs received echoing at least one INT record (transport.int)
	Timeouts        uint64 // retransmission timer expiries (packets)
	LostSack        uint64 // packets judged lost by the SACK-gap rule (retransmitted unless acknowledged first)
	RTTSamples      uint64
	RTTHist         [RTTBuckets]uint64 // RTT samples by RTTBucket (log2 buckets from 1 us)
	MsgsSent        uint64             // messages fully acknowledged
	MsgsFailed      uint64
	MsgsDelivered   uint64
	BytesDelivered  uint64
	ConnsOpened     uint64
	ConnsAccepted   uint64
	ConnsClosed     uint64
	ConnsAborted    uint64
	Malformed       uint64 // datagrams that failed to decode
	MalformedByKind [wire.NumErrors]uint64
	UnknownConn     uint64 // packets for connections we hold no state for
	ProtoViolations uint64 // well-formed packets that contradict the connection's state
	BadAcks         uint64 // ACKs and NACKs dropped whole: they acknowledge PSNs never sent or claim the impossible
	StaleAcks       uint64 // ACKs and NACKs too old to act on (behind the window, or a NACK of an earlier transmission)
	RecvBudgetDrops uint64 // data packets dropped unacknowledged because RecvBudget was reached
	ConnsEvicted    uint64 // unproven accepted connections evicted to admit another at MaxConns
	ConnsExpired    uint64 // idle connections forgotten (nothing outstanding either way)
	// ICMP unreachable reports (Endpoint.Unreachable): connections failed by one (their
	// peer had never answered), connections that ignored one (the peer had answered: a
	// forged or stale report), and reports for a peer we hold no connection to.
	UnreachableActed, UnreachableIgnored, UnreachableNoConn uint64
	// RecvBuffered is a gauge: bytes held for peers' messages, each buffer at its
	// capacity plus each open message's record, chunk table and span list (receiver.go
	// charge); at most RecvBudget but for one message (see Config.RecvBudget).
	RecvBuffered    uint64
	RecvBufferedMax uint64 // high-water mark of RecvBuffered
	// ConnHeld is a gauge: bytes of connection state held (ConnCharge each), bounded by
	// MaxConns x ConnCharge; with RecvBuffered, what the engine holds for peers.
	ConnHeld uint64
	// TimeWait is a gauge: identities of closed connections remembered (TIME_WAIT), at
	// most MaxConns+MaxTimeWait; TimeWaitHeld is their bytes (TimeWaitCharge each).
	TimeWait        uint64
	TimeWaitHeld    uint64
	TimeWaitRefused uint64 // first-contact packets dropped unacknowledged: TIME_WAIT cap reached

	// Receiver-driven credit (cc eqds, algos_eqds.go); all zero under other controllers.
	PullsSent      uint64 // PULL packets sent (receiver)
	PullsRecv      uint64 // PULL packets received (sender)
	BadPulls       uint64 // PULLs dropped: granting more than ever requested, or to a connection not sending against credit
	StalePulls     uint64 // PULLs no newer than a grant already seen (reordered or duplicated)
	PullDebtCapped uint64 // arrivals whose request passed a connection's cap of outstanding requests (not granted)

	// Loss-recovery modes (recovery.go, ec.go); all zero under the default "sack".
	GoBacks         uint64 // go-back-N NACKs acted on (sender; the resends count in RetxNack)
	GoBackNacksSent uint64 // go-back-N NACKs sent (receiver)
	OutOfOrderDrops uint64 // data packets dropped for arriving beyond the expected PSN (receiver, gobackn)
	ParitySent      uint64 // EC parity packets sent
	ParityBytes     uint64 // EC parity payload bytes sent
	ParityRecv      uint64 // EC parity packets received
	ParityDropped   uint64 // EC parity packets not kept (block already complete, late, duplicate, trimmed, no EC here)
	ECRebuilt       uint64 // data packets rebuilt from parity (receiver)
	ParityRefused   uint64 // EC parity not of the configured code, from an unproven peer, or naming PSNs its message's data contradicts
	ECBad           uint64 // EC blocks whose rebuild failed the checksum their parity carries (nothing of them kept)

	// Receiver not ready (rnr.go, Hooks.Gate); all zero without a gate.
	RNRSent uint64 // first packets of messages refused because their destination could not take them (receiver)
	RNRRecv uint64 // RNR NACKs acted on: the packet is resent after a back-off (sender)
	// MsgsDisplaced counts placed messages moved back into the engine's chunks (Displace).
	MsgsDisplaced uint64

	// Auth counts packet authentication (auth.go); all zero when it is off.
	Auth AuthStats
}

// RTTBuckets is the number of buckets of Stats.RTTHist.
const RTTBuckets = 22

// RTTBucketBound returns the upper bound (exclusive), ns, of RTTHist bucket i: 2^(10+i) ns,
// about 1 us for bucket 0 doubling to about 2.1 s; the last bucket also holds everything larger.
func RTTBucketBound(i int) int64 { return 1 << (10 + i) }

// rttBucket returns the RTTHist bucket of an RTT sample of rtt ns.
func rttBucket(rtt int64) int {
	if rtt < 1<<10 {
		return 0
	}
	b := bits.Len64(uint64(rtt)) - 10
	return min(b, RTTBuckets-1)
}
