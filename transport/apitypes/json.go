package apitypes

import (
	"time"
)

// Stats are the API server's counters.
type Stats struct {
	Sessions                int64  `json:"sessions"`                  // gauge: open messaging sessions
	Outstanding             int64  `json:"outstanding_bytes"`         // gauge: bytes accepted and not yet Sent/Failed, all sessions
	RecvQueued              int64  `json:"recv_queued_bytes"`         // gauge: bytes of received messages queued or being written to clients
	SessionsTotal           uint64 `json:"sessions_total"`            // sessions ever opened
	ClientsRefused          uint64 `json:"clients_refused"`           // sessions refused at max_clients
	SessionsEvicted         uint64 `json:"sessions_evicted"`          // idle sessions closed to make room for a new client
	MsgsAccepted            uint64 `json:"msgs_accepted"`             // messages handed to the engine
	BytesAccepted           uint64 `json:"bytes_accepted"`            // their bytes (without envelope)
	MsgsRejected            uint64 `json:"msgs_rejected"`             // Send frames refused with an Error
	BadDestination          uint64 `json:"bad_destination"`           // of them: destination cannot be sent to
	OutstandingRefused      uint64 `json:"outstanding_refused"`       // of them: at the session's max_outstanding
	OutstandingRefusedTotal uint64 `json:"outstanding_refused_total"` // of them: at max_outstanding_total
	MsgsDelivered           uint64 `json:"msgs_delivered"`            // received messages queued to a client
	BytesDelivered          uint64 `json:"bytes_delivered"`           // their bytes
	Undeliverable           uint64 `json:"undeliverable"`             // received for an endpoint nobody bound
	RecvOverflow            uint64 `json:"recv_overflow"`             // dropped at a client's max_recv_queue
	RecvOverflowTotal       uint64 `json:"recv_overflow_total"`       // dropped at max_recv_queue_total
	BadEnvelope             uint64 `json:"bad_envelope"`              // received messages without a valid envelope
	ProtocolErrors          uint64 `json:"protocol_errors"`           // sessions closed for malformed frames, requests refused outside the HTTP subset
	ReadTimeouts            uint64 `json:"read_timeouts"`             // sessions closed for a frame stalled past read_timeout, request heads past header_timeout
	ClientsVanishd          uint64 `json:"clients_vanished"`          // sessions that ended with a message half sent
	MsgsFD                  uint64 `json:"msgs_memfd"`                // messages passed as a memfd (no copy)
	ClientsStalled          uint64 `json:"clients_stalled"`           // sessions closed because the client stopped reading
	RingSessions            int64  `json:"ring_sessions"`             // gauge: sessions with a shared-memory receive ring
	RingMsgs                uint64 `json:"ring_msgs"`                 // received messages handed over in a receive ring
	RingBytes               uint64 `json:"ring_bytes"`                // their bytes
	RingFallback            uint64 `json:"ring_fallback"`             // received messages larger than their session's ring, written to the socket
	RingPlaced              uint64 `json:"ring_placed"`               // received messages the engine wrote straight into their session's ring (of ring_msgs)
	RingRefused             uint64 `json:"ring_refused"`              // RecvRing requests refused (Error 12)
	RingBadReleases         uint64 `json:"ring_bad_releases"`         // sessions closed for an unknown, unannounced or repeated release
	RecvPaused              uint64 `json:"recv_paused"`               // messages refused at their first packet because their session's queue was full (back-pressure)
	RingDisplaced           uint64 `json:"ring_displaced"`            // placements that blocked a ring's reclamation, moved out into the daemon's buffers
	MsgsLocal               uint64 `json:"msgs_local"`                // messages to an endpoint of this daemon, handed over in memory
	LocalWaits              uint64 `json:"local_waits"`               // of them: waited for room in the receiving session's queue
	MsgsCancelled           uint64 `json:"msgs_cancelled"`            // messages cancelled by their client (CancelResult 0)
	ClientsRefusedUser      uint64 `json:"clients_refused_user"`      // sessions refused at max_clients_per_user (of clients_refused)
	DirectPairs             uint64 `json:"direct_pairs"`              // socket pairs made for the direct path between two local sessions
	DirectGrants            uint64 `json:"direct_grants"`             // direct path requests granted (a sender now writes to a receiver over a pair)
	ControlConns            int64  `json:"control_conns"`             // gauge: open control connections (not upgraded to a session)
	ControlRefused          uint64 `json:"control_refused"`           // control connections refused at max_control_conns (503)
}

// PeerCred is the identity of a client process (SO_PEERCRED).
type PeerCred struct {
	PID int32  `json:"pid"`
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

// Status is the body of GET /v1/status.
type Status struct {
	Version      string  `json:"version"`
	PID          int     `json:"pid"`
	Listen       string  `json:"listen"`
	UptimeS      float64 `json:"uptime_s"`
	Connections  int     `json:"connections"`
	Sessions     int64   `json:"sessions"`
	Pending      int     `json:"pending_messages"`
	ShuttingDown bool    `json:"shutting_down"`
	// MemoryBound is the daemon's worst-case memory in bytes (the sum of its bounds),
	// MemoryLimit the limit it fits (its cgroup's or memory_limit; 0: none).
	MemoryBound int64 `json:"memory_bound"`
	MemoryLimit int64 `json:"memory_limit"`
}

// Version is the body of GET /v1/version.
type Version struct {
	Version  string `json:"version"`
	Go       string `json:"go"`
	Protocol string `json:"protocol"`
	// Protocols lists every messaging protocol version the daemon speaks, highest first.
	Protocols []string `json:"protocols,omitempty"`
	Wire      int      `json:"wire_version"`
}

// Conn is one connection in GET /v1/conns.
type Conn struct {
	ID          string        `json:"id"`
	Peer        string        `json:"peer"`
	Initiator   bool          `json:"initiator"`
	CC          string        `json:"cc"`
	LB          string        `json:"lb"`
	SRTT        time.Duration `json:"srtt_ns"` // smoothed RTT (JSON: integer ns)
	RTO         time.Duration `json:"rto_ns"`  // retransmission timeout (JSON: integer ns)
	Window      int           `json:"window"`
	PacingRate  int64         `json:"pacing_rate"`
	InFlight    int           `json:"in_flight"`
	QueuedMsgs  int           `json:"queued_msgs"`
	RecvBuffers uint64        `json:"recv_buffers"`
	// BytesAcked and BytesReceived are the connection's payload bytes acknowledged by the
	// peer and received from it: a sender's and a receiver's network progress.
	BytesAcked    uint64 `json:"bytes_acked"`
	BytesReceived uint64 `json:"bytes_received"`
	Closing       bool   `json:"closing"`
	Freezing      bool   `json:"lb_freezing"`
	Freezes       uint64 `json:"lb_freeze_episodes"`
	PathHops      int    `json:"path_hops"` // routers on the path, learnt from the peer's IP TTLs (-1: unknown)
}

// SessionInfo is one session in GET /v1/sessions.
type SessionInfo struct {
	ID          uint64    `json:"id"`
	Cred        *PeerCred `json:"peer_cred,omitempty"`
	Endpoint    uint32    `json:"endpoint"`
	Started     time.Time `json:"started"`
	Outstanding int64     `json:"outstanding_bytes"`
	RecvQueued  int64     `json:"recv_queued_bytes"`  // received messages waiting to be written
	RecvWriting int64     `json:"recv_writing_bytes"` // the received message being written to the client
	IdleS       float64   `json:"idle_s"`             // since the last frame read from or written to the client
	RecvRing    int64     `json:"recv_ring_bytes"`    // the session's shared-memory receive ring (0: none)
	RecvRingUse int64     `json:"recv_ring_used"`     // bytes of it holding messages not yet released
}

// Limits is the daemon's API configuration as served in GET /v1/capabilities ("limits"):
// the `api:` section of smarttd's config.
type Limits struct {
	Socket              string   `json:"socket"`
	Group               string   `json:"group"`
	MaxMessage          int64    `json:"max_message"`
	MaxOutstanding      int64    `json:"max_outstanding"`
	MaxOutstandingTotal int64    `json:"max_outstanding_total"`
	MaxRecvQueue        int64    `json:"max_recv_queue"`
	MaxRecvQueueTotal   int64    `json:"max_recv_queue_total"`
	RecvBackpressure    bool     `json:"recv_backpressure"`
	MaxClients          int      `json:"max_clients"`
	MaxClientsPerUser   int      `json:"max_clients_per_user"`
	MaxControlConns     int      `json:"max_control_conns"`
	MaxRecvRing         int64    `json:"max_recv_ring"`
	DirectWrites        bool     `json:"direct_writes"`
	DirectReads         bool     `json:"direct_reads"`
	SocketBuffer        int64    `json:"socket_buffer"`
	HeaderTimeout       Duration `json:"header_timeout"`
	ReadTimeout         Duration `json:"read_timeout"`
	WriteTimeout        Duration `json:"write_timeout"`
	IdleTimeout         Duration `json:"idle_timeout"`
}

// Capabilities is the body of GET /v1/capabilities.
type Capabilities struct {
	Socket     any      `json:"socket"` // the datapath's capabilities: an object of its own keys
	CC         []string `json:"cc"`
	LB         []string `json:"lb"`
	Protocol   string   `json:"protocol"`
	MaxPayload int      `json:"max_frame_payload"`
	Limits     Limits   `json:"limits"`
}

// Counters is the body of GET /v1/counters.
type Counters struct {
	Engine EngineStats `json:"engine"`
	API    Stats       `json:"api"`
	Socket any         `json:"socket,omitempty"` // the datapath's counters: an object of its own keys
}

// EngineStats are the transport engine's counters as served in GET /v1/counters
// ("engine"), keys in snake_case; docs/engine.md describes each. Auth's keys are
// snake_case too ("failed", "replayed", ...).
type EngineStats struct {
	PacketsSent     uint64   `json:"packets_sent"` // all packets handed to the driver
	PacketsRecv     uint64   `json:"packets_recv"` // all datagrams fed in
	DataSent        uint64   `json:"data_sent"`    // data packets, first transmissions
	BytesSent       uint64   `json:"bytes_sent"`   // payload bytes, first transmissions
	RetxSack        uint64   `json:"retx_sack"`    // retransmissions after a SACK gap
	RetxNack        uint64   `json:"retx_nack"`    // retransmissions after a NACK (trimmed packet)
	RetxTimeout     uint64   `json:"retx_timeout"` // retransmissions after a timeout
	AcksSent        uint64   `json:"acks_sent"`
	AcksRecv        uint64   `json:"acks_recv"`
	AcksHeld        uint64   `json:"acks_held"`    // completions whose ACK waited for outgoing data (ack.complete_delay)
	AcksRode        uint64   `json:"acks_rode"`    // held ACKs that left ahead of a data packet to their peer
	BundlesSent     uint64   `json:"bundles_sent"` // held ACKs that rode inside their answer's datagram
	BundlesRecv     uint64   `json:"bundles_recv"` // datagrams received as an ACK with a DATA packet behind it
	MsgsPlaced      uint64   `json:"msgs_placed"`  // messages received straight into a client's receive ring
	NacksSent       uint64   `json:"nacks_sent"`
	NacksRecv       uint64   `json:"nacks_recv"`
	ProbesSent      uint64   `json:"probes_sent"`
	DataRecv        uint64   `json:"data_recv"`     // data packets received (including duplicates and trimmed)
	DupData         uint64   `json:"dup_data"`      // duplicate data packets (already received)
	BeyondWindow    uint64   `json:"beyond_window"` // data packets beyond the PSN or flow-control window (dropped)
	Trimmed         uint64   `json:"trimmed"`       // trimmed data packets received
	CERecv          uint64   `json:"ce_recv"`       // CE-marked data packets received
	CEEchoed        uint64   `json:"ce_echoed"`     // ACKs received that echo a CE mark
	CEReported      uint64   `json:"ce_reported"`   // CE-marked data packets the peer reported in ACKs (sum of CECount)
	INTAcks         uint64   `json:"int_acks"`      // ACKs received echoing at least one INT record (transport.int)
	Timeouts        uint64   `json:"timeouts"`      // retransmission timer expiries (packets)
	LostSack        uint64   `json:"lost_sack"`     // packets judged lost by the SACK-gap rule (retransmitted unless acknowledged first)
	RTTSamples      uint64   `json:"rtt_samples"`
	RTTHist         []uint64 `json:"rtt_hist"`  // RTT samples by RTTBucket (log2 buckets from 1 us)
	MsgsSent        uint64   `json:"msgs_sent"` // messages fully acknowledged
	MsgsFailed      uint64   `json:"msgs_failed"`
	MsgsDelivered   uint64   `json:"msgs_delivered"`
	BytesDelivered  uint64   `json:"bytes_delivered"`
	ConnsOpened     uint64   `json:"conns_opened"`
	ConnsAccepted   uint64   `json:"conns_accepted"`
	ConnsClosed     uint64   `json:"conns_closed"`
	ConnsAborted    uint64   `json:"conns_aborted"`
	Malformed       uint64   `json:"malformed"` // datagrams that failed to decode
	MalformedByKind []uint64 `json:"malformed_by_kind"`
	UnknownConn     uint64   `json:"unknown_conn"`      // packets for connections we hold no state for
	ProtoViolations uint64   `json:"proto_violations"`  // well-formed packets that contradict the connection's state
	BadAcks         uint64   `json:"bad_acks"`          // ACKs and NACKs dropped whole: they acknowledge PSNs never sent or claim the impossible
	StaleAcks       uint64   `json:"stale_acks"`        // ACKs and NACKs too old to act on (behind the window, or a NACK of an earlier transmission)
	RecvBudgetDrops uint64   `json:"recv_budget_drops"` // data packets dropped unacknowledged because RecvBudget was reached
	ConnsEvicted    uint64   `json:"conns_evicted"`     // unproven accepted connections evicted to admit another at MaxConns
	ConnsExpired    uint64   `json:"conns_expired"`     // idle connections forgotten (nothing outstanding either way)
	RecvBuffered    uint64   `json:"recv_buffered"`     // gauge: bytes of message buffers currently held for peers (at most RecvBudget)
	RecvBufferedMax uint64   `json:"recv_buffered_max"` // high-water mark of RecvBuffered
	ConnHeld        uint64   `json:"conn_held"`         // gauge: bytes of connection state (transport.Config.ConnCharge each)
	TimeWait        uint64   `json:"time_wait"`         // gauge: closed connections' identities remembered (TIME_WAIT entries)
	TimeWaitHeld    uint64   `json:"time_wait_held"`    // gauge: their bytes (transport.TimeWaitCharge each)
	TimeWaitRefused uint64   `json:"time_wait_refused"` // first-contact packets dropped unacknowledged: the TIME_WAIT cap was reached
	PullsSent       uint64   `json:"pulls_sent"`        // PULL packets sent (receiver, cc eqds)
	PullsRecv       uint64   `json:"pulls_recv"`        // PULL packets received (sender, cc eqds)
	BadPulls        uint64   `json:"bad_pulls"`         // PULLs dropped: granting more than requested, or unexpected
	StalePulls      uint64   `json:"stale_pulls"`       // PULLs no newer than a grant already seen
	PullDebtCapped  uint64   `json:"pull_debt_capped"`  // arrivals whose credit request passed the connection's cap

	// Loss-recovery modes (transport.recovery); all zero under the default "sack".
	GoBacks         uint64 `json:"go_backs"`           // go-back-N NACKs acted on (sender; the resends count in retx_nack)
	GoBackNacksSent uint64 `json:"go_back_nacks_sent"` // go-back-N NACKs sent (receiver)
	OutOfOrderDrops uint64 `json:"out_of_order_drops"` // data dropped beyond the expected PSN (receiver, gobackn)
	ParitySent      uint64 `json:"parity_sent"`        // EC parity packets sent
	ParityBytes     uint64 `json:"parity_bytes"`       // EC parity payload bytes sent
	ParityRecv      uint64 `json:"parity_recv"`        // EC parity packets received
	ParityDropped   uint64 `json:"parity_dropped"`     // EC parity packets not kept
	ECRebuilt       uint64 `json:"ec_rebuilt"`         // data packets rebuilt from parity (receiver)
	ParityRefused   uint64 `json:"parity_refused"`     // EC parity not of the configured code, unproven peer, or contradicting its message
	ECBad           uint64 `json:"ec_bad"`             // EC rebuilds that failed their parity's checksum
	// Receiver not ready (flow control to the sending application).
	RNRSent       uint64 `json:"rnr_sent"`       // first packets of messages refused: their session's queue was full (receiver)
	RNRRecv       uint64 `json:"rnr_recv"`       // refusals acted on: the packet is resent after a back-off (sender)
	MsgsDisplaced uint64 `json:"msgs_displaced"` // placed messages moved out of a stalled receive ring into the daemon's buffers
	// Return-to-sender trimming: headers of our own packets a switch sent back.
	ReturnedRecv uint64 `json:"returned_recv"` // acted on as NACKs
	ReturnedBad  uint64 `json:"returned_bad"`  // dropped: no live connection, wrong peer, or not in flight
	// ReturnedIgnored: not acted on (return_to_sender off, or the connection's trust spent).
	ReturnedIgnored uint64 `json:"returned_ignored"`
	// ReturnedFalse: returns acted on whose original was acknowledged after all.
	ReturnedFalse uint64 `json:"returned_false"`
	// ICMP unreachable reports: connections failed by one (the peer never answered),
	// connections that ignored one (the peer had answered), reports for no connection.
	UnreachableActed   uint64 `json:"unreachable_acted"`
	UnreachableIgnored uint64 `json:"unreachable_ignored"`
	UnreachableNoConn  uint64 `json:"unreachable_no_conn"`

	// Auth counts packet authentication (auth.go); all zero when it is off.
	Auth map[string]uint64 `json:"auth"`
	// RTTHistBoundsNs are the upper bounds (exclusive), ns, of RTTHist's buckets; the last
	// bucket also holds everything larger.
	RTTHistBoundsNs []int64 `json:"rtt_hist_bounds_ns"`
}

// Uptime returns how long the daemon has run.
func (s Status) Uptime() time.Duration { return time.Duration(s.UptimeS * float64(time.Second)) }

// Idle returns how long the session has been idle.
func (s SessionInfo) Idle() time.Duration { return time.Duration(s.IdleS * float64(time.Second)) }
