// Package metrics exports a daemon's counters to Prometheus on its own registry. Engine
// counters and per-connection state are read when scraped (nothing is looked up per
// packet); message completion times are observed once per message on a pre-bound
// histogram.
//
// Conventions: every count is a counter (_total) that never falls, including those summed
// over connections (QuickAdapt firings, freezing episodes: the daemon keeps the totals of
// closed connections); each count is exported once; per-connection series (labels conn
// and peer, gone when the connection closes) are off unless Sources.PerConn, so the
// number of series does not grow with the number of peers; smartt_build_info carries the
// version. TestPromlintClean runs client_golang's promlint over a scrape.
package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/smartt-transport/smartt/hwprofile/timing"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/wire"
	"github.com/smartt-transport/smartt/version"
)

// Sources are where the collector reads at scrape time. Any may be nil.
type Sources struct {
	Engine func() transport.Stats
	Conns  func() []transport.ConnInfo
	API    func() api.Stats
	// Socket adds the socket layer's metrics (capabilities, counters).
	Socket func(ch chan<- prometheus.Metric)
	CC, LB string // algorithm names, for smartt_algorithm_info
	// PerConn exports per-connection series (labels conn and peer). Off by default: their
	// number grows with the peers.
	PerConn bool
	// Decisions returns the congestion controllers' decision-time statistics.
	Decisions func() daemon.DecisionStats
}

// Metrics is a daemon's registry and the metrics it updates itself.
type Metrics struct {
	Registry   *prometheus.Registry
	Completion prometheus.Histogram // message completion time, seconds (observed per message)
	Size       prometheus.Histogram // sent message size, bytes

	rxBatches, rxStamped atomic.Uint64
	src                  Sources
	totals               connTotals
}

// New builds the registry with the collector over src.
func New(src Sources) *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry(), src: src}
	m.Completion = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "smartt_message_completion_seconds", Help: "Time from accepting a message to its last acknowledgement.",
		Buckets: prometheus.ExponentialBuckets(10e-6, 4, 12)})
	m.Size = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "smartt_message_size_bytes", Help: "Size of messages sent.",
		Buckets: prometheus.ExponentialBuckets(64, 8, 10)})
	v := version.Get()
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "smartt_build_info",
		Help:        "Always 1; the labels say which smartt this is (version, VCS revision, Go version).",
		ConstLabels: prometheus.Labels{"version": v.Version, "revision": v.Revision, "goversion": v.GoVersion}})
	build.Set(1)
	m.Registry.MustRegister(m.Completion, m.Size, build, collector{m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Refresh reads the live connections' counters so the totals of a connection that closes
// before the next scrape include what it counted up to now. The daemon calls it every
// second; each scrape does too.
func (m *Metrics) Refresh() {
	if m.src.Conns != nil {
		m.totals.update(m.src.Conns())
	}
}

// connTotals sums per-connection counters over every connection the daemon has had: the
// live ones' current values plus the last values seen of the closed ones, so the sums
// never fall. Counts a connection makes after the last Refresh before it closes are lost
// (at most a second's worth).
type connTotals struct {
	mu                        sync.Mutex
	gen                       uint64
	last                      map[transport.ConnID]connCounts
	closedQuick, closedFreeze uint64
}

type connCounts struct {
	peer          netip.AddrPort
	quick, freeze uint64
	gen           uint64
}

// update folds a snapshot of the live connections in and returns the totals.
func (t *connTotals) update(cs []transport.ConnInfo) (quick, freeze uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last = map[transport.ConnID]connCounts{}
	}
	t.gen++
	for _, ci := range cs {
		e, ok := t.last[ci.ID]
		if ok && (e.peer != ci.Peer || ci.QuickAdapts < e.quick || ci.FreezeEpisodes < e.freeze) {
			// The ID now names another connection: the old one closed.
			t.closedQuick += e.quick
			t.closedFreeze += e.freeze
		}
		e = connCounts{peer: ci.Peer, quick: ci.QuickAdapts, freeze: ci.FreezeEpisodes, gen: t.gen}
		t.last[ci.ID] = e
		quick += e.quick
		freeze += e.freeze
	}
	for id, e := range t.last {
		if e.gen != t.gen {
			t.closedQuick += e.quick
			t.closedFreeze += e.freeze
			delete(t.last, id)
		}
	}
	return quick + t.closedQuick, freeze + t.closedFreeze
}

// ObserveBatch counts one received batch of n datagrams, stamped of which carried a kernel
// receive timestamp (called once per batch).
func (m *Metrics) ObserveBatch(n, stamped int) {
	m.rxBatches.Add(1)
	m.rxStamped.Add(uint64(stamped))
}

// ObserveMessage records a completed message.
func (m *Metrics) ObserveMessage(elapsedNs int64, size int) {
	m.Completion.Observe(float64(elapsedNs) / 1e9)
	m.Size.Observe(float64(size))
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	dPackets    = desc("smartt_packets_total", "Datagrams sent (tx) and received (rx) by the engine.", "dir")
	dData       = desc("smartt_data_packets_total", "Data packets: first transmissions (tx) and received, duplicates included (rx).", "dir")
	dPayload    = desc("smartt_payload_bytes_total", "Payload bytes: first transmissions (tx), delivered in messages (rx).", "dir")
	dRetx       = desc("smartt_retransmissions_total", "Retransmissions by cause.", "cause")
	dCE         = desc("smartt_ce_marks_total", "CE marks: data packets received CE-marked (received); ACKs echoing CE (echoed); CE-marked packets the peer reported in ACKs (reported).", "kind")
	dTrimmed    = desc("smartt_trimmed_packets_total", "Trimmed data packets received.")
	dNacks      = desc("smartt_nacks_total", "NACKs sent and received.", "dir")
	dAcks       = desc("smartt_acks_total", "ACKs sent and received.", "dir")
	dAcksHeld   = desc("smartt_acks_held_total", "ACKs of one-packet messages held for the receiver's answer (ack.complete_delay): held, rode (left ahead of a data packet to the peer, in its batch) and bundled (rode inside the data packet's datagram).", "kind")
	dTimeouts   = desc("smartt_timeouts_total", "Retransmission timer expiries (packets).")
	dProbes     = desc("smartt_probes_sent_total", "Flow-control probes sent.")
	dDup        = desc("smartt_duplicate_packets_total", "Duplicate data packets received.")
	dBeyond     = desc("smartt_beyond_window_total", "Data packets dropped beyond the PSN or flow-control window.")
	dMalformed  = desc("smartt_malformed_total", "Packets that failed to decode, by error (bundle: what followed a bundled ACK was not one DATA packet).", "error")
	dUnknown    = desc("smartt_unknown_conn_total", "Packets for connections we hold no state for.")
	dViol       = desc("smartt_protocol_violations_total", "Well-formed packets contradicting connection state.")
	dBadAcks    = desc("smartt_acks_dropped_total", "ACKs and NACKs dropped whole, by reason (bad: acknowledge what was never sent; stale: too old).", "reason")
	dBudgetDrop = desc("smartt_recv_budget_drops_total", "Data packets dropped unacknowledged because the receive budget was reached.")
	dRecovery   = desc("smartt_recovery_events_total", "Loss-recovery events (transport.recovery modes and return-to-sender trimming): go_back, go_back_nack_sent, out_of_order_drop, parity_sent, parity_recv, parity_dropped, ec_rebuilt, returned_recv, returned_bad.", "event")
	dMsgs       = desc("smartt_messages_total", "Messages by outcome.", "result")
	dConnsEv    = desc("smartt_connection_events_total", "Connections opened, accepted, closed, aborted, evicted (unproven, at max_conns) and expired (idle).", "event")
	dICMP       = desc("smartt_icmp_unreachable_total", "ICMP destination-unreachable reports for our datagrams: acted on (a dial the peer never answered failed), ignored (the peer had answered: forged or stale), no_conn (no connection to that peer).", "action")
	dConns      = desc("smartt_connections", "Live connections.")
	dBuffered   = desc("smartt_recv_buffered_bytes", "Bytes held for peers' messages: buffers at capacity, records, chunk tables.")
	dConnHeld   = desc("smartt_conn_held_bytes", "Bytes of connection state held for peers (transport.Config.ConnCharge per connection).")
	dTimeWait   = desc("smartt_time_wait_entries", "Closed connections' identities remembered (TIME_WAIT entries).")
	dTWHeld     = desc("smartt_time_wait_held_bytes", "Bytes of TIME_WAIT entries (transport.TimeWaitCharge each).")
	dTWRefused  = desc("smartt_time_wait_refused_total", "First-contact packets dropped unacknowledged because the TIME_WAIT cap was reached.")
	dBufMax     = desc("smartt_recv_buffered_max_bytes", "High-water mark of smartt_recv_buffered_bytes.")
	dRTT        = desc("smartt_rtt_seconds", "RTT samples (echoed transmit time minus receiver hold time).")
	dRxBatch    = desc("smartt_rx_batches_total", "Receive batches read from the socket.")
	dRxStamped  = desc("smartt_rx_kernel_timestamps_total", "Received datagrams that carried a kernel timestamp.")
	dAuth       = desc("smartt_auth_dropped_total", "Packets dropped by packet authentication, by reason (docs/security.md).", "reason")
	dAuthTrim   = desc("smartt_auth_trim_hints_total", "Trimmed data packets (seal cut off): used as a NACK hint, or ignored.", "result")
	dAuthSess   = desc("smartt_auth_sessions", "Receiving authentication sessions held.")
	dAuthRekey  = desc("smartt_auth_rekeys_total", "Sending authentication sessions started.")
	dAlgo       = desc("smartt_algorithm_info", "Always 1; the labels name the congestion control and load balancer in use.", "cc", "lb")

	// The daemon's engine shards and socket layer (daemon.go).
	dShardPkts  = desc("smartt_shard_packets_total", "Datagrams each engine shard sent (tx) and fed to its engine (rx).", "shard", "dir")
	dShardConns = desc("smartt_shard_connections", "Live connections of each engine shard.", "shard")
	dShardHand  = desc("smartt_shard_handoff_total", "Datagrams a shard's socket received for another shard (out), taken from other shards (in), or dropped on a full shard queue (dropped).", "shard", "kind")

	dCap       = desc("smartt_socket_capability", "Socket capabilities granted by the kernel (1) or not (0).", "cap")
	dTSSource  = desc("smartt_timestamp_source", "Receive timestamp source in use (1).", "source")
	dSockB     = desc("smartt_socket_bytes_total", "UDP payload bytes through the sockets.", "dir")
	dSockErr   = desc("smartt_socket_errors_total", "Socket errors.", "dir")
	dSockECN   = desc("smartt_socket_rx_ecn_total", "Datagrams received ECN-capable (ect) and CE-marked (ce).", "codepoint")
	dSockNoTS  = desc("smartt_socket_rx_user_timestamps_total", "Datagrams received without a kernel timestamp.")
	dSockTx    = desc("smartt_socket_tx_timestamps_total", "Sampled TX timestamps.", "state")
	dSockGRO   = desc("smartt_socket_rx_gro_buffers_total", "Receive buffers that held several datagrams (UDP GRO).")
	dSockBusy  = desc("smartt_socket_rx_busy_poll_hits_total", "Reads that found datagrams while busy-polling (udp.busy_poll): wake-ups saved.")
	dSockGSO   = desc("smartt_socket_tx_gso_total", "UDP GSO sends (messages) and the packets inside them (segments).", "kind")
	dSockBuf   = desc("smartt_socket_buffer_bytes", "Effective socket buffer sizes.", "dir")
	dSockBig   = desc("smartt_socket_tx_oversize_total", "Datagrams the kernel refused as larger than the path MTU (EMSGSIZE; Don't Fragment set).")
	dSockICMP  = desc("smartt_socket_rx_icmp_unreachable_total", "ICMP destination-unreachable reports read from the send sockets' error queues: handed to the engines (read), dropped for a full batch, or read by the TX-timestamp poll first (lost).", "state")
	dSockStray = desc("smartt_socket_rx_strays_total", "Datagrams that arrived on an EV port (sent to the wrong port): received, and the smartt first contacts among them answered with an EV-port RESET (reset).", "kind")
	dLinkMTU   = desc("smartt_socket_link_mtu_bytes", "Smallest MTU of the interfaces the listen address uses (checked at start).")
	dTxDelay   = desc("smartt_tx_path_delay_seconds", "Kernel transmit timestamp minus user-space send time of sampled packets.")

	connLabels = []string{"conn", "peer"}
	dCWindow   = desc("smartt_conn_window_bytes", "Congestion window of a connection.", connLabels...)
	dCRate     = desc("smartt_conn_pacing_rate_bytes_per_second", "Pacing rate of a connection (0: unpaced).", connLabels...)
	dCSRTT     = desc("smartt_conn_srtt_seconds", "Smoothed RTT of a connection.", connLabels...)
	dCRTO      = desc("smartt_conn_rto_seconds", "Retransmission timeout of a connection.", connLabels...)
	dCInflight = desc("smartt_conn_inflight_bytes", "Payload bytes in flight on a connection.", connLabels...)
	dCQueued   = desc("smartt_conn_queued_messages", "Outgoing messages not yet acknowledged on a connection.", connLabels...)
	dCRecvBufs = desc("smartt_conn_recv_buffered_bytes", "Bytes of message buffers held for a connection.", connLabels...)
	dCFreezing = desc("smartt_conn_lb_freezing", "The connection's load balancer is in freezing mode (1) or not (0).", connLabels...)
	dCFreezes  = desc("smartt_conn_lb_freeze_episodes_total", "Times the connection's load balancer entered freezing mode.", connLabels...)
	dCQuick    = desc("smartt_conn_cc_quick_adapt_total", "QuickAdapt firings of a connection's controller (SMaRTT).", connLabels...)
	dCCuts     = desc("smartt_conn_cc_cuts_total", "Window or rate decreases of a connection's controller.", connLabels...)
	dQuick     = desc("smartt_cc_quick_adapt_total", "QuickAdapt firings of the congestion controllers of all connections, closed ones included.")
	dFreezes   = desc("smartt_lb_freeze_episodes_total", "Freezing-mode episodes of the load balancers of all connections, closed ones included.")
	dDecision  = desc("smartt_cc_decision_seconds", "Wall time of each congestion-control decision on this host.")
	dOverruns  = desc("smartt_cc_decision_overruns_total", "Decisions that took longer than the hardware profile's budget.")
	dBudget    = desc("smartt_cc_decision_budget_seconds", "Decision-time budget of the configured hardware profile (0: none).")
	dAPISess   = desc("smartt_api_sessions", "Open API messaging sessions.")
	dAPIRings  = desc("smartt_api_ring_sessions", "Messaging sessions with a shared-memory receive ring (each at most api.max_recv_ring bytes).")
	dAPIOut    = desc("smartt_api_outstanding_bytes", "Bytes accepted from clients and not yet delivered or failed (cap: api.max_outstanding_total).")
	dAPIQueued = desc("smartt_api_recv_queued_bytes", "Bytes of received messages queued for clients (cap: api.max_recv_queue_total).")
	dAPI       = desc("smartt_api_events_total", "API server events.", "event")
	dAPIBytes  = desc("smartt_api_bytes_total", "Message bytes accepted from and delivered to clients.", "dir")
)

// malformedNames label smartt_malformed_total by wire error code.
var malformedNames = [wire.NumErrors]string{"short", "version", "type", "flags", "conn_id", "length", "sack_width", "clean_evs", "buffer", "int", "bundle"}

type collector struct{ m *Metrics }

// Describe sends nothing: the collector is "unchecked", because its series (connections,
// socket metrics) come and go.
func (c collector) Describe(ch chan<- *prometheus.Desc) {}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v uint64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

// lv is one labelled value of a metric with several series.
type lv struct {
	l string
	v uint64
}

// counters writes one counter of d per labelled value.
func counters(ch chan<- prometheus.Metric, d *prometheus.Desc, vs ...lv) {
	for _, x := range vs {
		counter(ch, d, x.v, x.l)
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// Collect reads every source once and emits its series.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	m, src := c.m, c.m.src
	counter(ch, dRxBatch, m.rxBatches.Load())
	counter(ch, dRxStamped, m.rxStamped.Load())
	if src.CC != "" || src.LB != "" {
		gauge(ch, dAlgo, 1, src.CC, src.LB)
	}
	if src.Engine != nil {
		s := src.Engine()
		counters(ch, dPackets, lv{"tx", s.PacketsSent}, lv{"rx", s.PacketsRecv})
		counters(ch, dData, lv{"tx", s.DataSent}, lv{"rx", s.DataRecv})
		counters(ch, dPayload, lv{"tx", s.BytesSent}, lv{"rx", s.BytesDelivered})
		counters(ch, dRetx, lv{"sack", s.RetxSack}, lv{"nack", s.RetxNack}, lv{"timeout", s.RetxTimeout})
		counters(ch, dCE, lv{"received", s.CERecv}, lv{"echoed", s.CEEchoed}, lv{"reported", s.CEReported})
		counter(ch, dTrimmed, s.Trimmed)
		counters(ch, dNacks, lv{"tx", s.NacksSent}, lv{"rx", s.NacksRecv})
		counters(ch, dAcks, lv{"tx", s.AcksSent}, lv{"rx", s.AcksRecv})
		counters(ch, dAcksHeld, lv{"held", s.AcksHeld}, lv{"rode", s.AcksRode}, lv{"bundled", s.BundlesSent})
		counter(ch, dTimeouts, s.Timeouts)
		counter(ch, dProbes, s.ProbesSent)
		counter(ch, dDup, s.DupData)
		counter(ch, dBeyond, s.BeyondWindow)
		for k := range s.MalformedByKind {
			counter(ch, dMalformed, s.MalformedByKind[k], malformedNames[k])
		}
		counter(ch, dUnknown, s.UnknownConn)
		counter(ch, dViol, s.ProtoViolations)
		counters(ch, dBadAcks, lv{"bad", s.BadAcks}, lv{"stale", s.StaleAcks})
		counter(ch, dBudgetDrop, s.RecvBudgetDrops)
		counters(ch, dRecovery,
			lv{"go_back", s.GoBacks}, lv{"go_back_nack_sent", s.GoBackNacksSent},
			lv{"out_of_order_drop", s.OutOfOrderDrops}, lv{"parity_sent", s.ParitySent},
			lv{"parity_recv", s.ParityRecv}, lv{"parity_dropped", s.ParityDropped},
			lv{"ec_rebuilt", s.ECRebuilt}, lv{"parity_refused", s.ParityRefused}, lv{"ec_bad", s.ECBad},
			lv{"returned_recv", s.ReturnedRecv}, lv{"returned_bad", s.ReturnedBad},
			lv{"returned_ignored", s.ReturnedIgnored}, lv{"returned_false", s.ReturnedFalse},
		)
		counters(ch, dMsgs, lv{"sent", s.MsgsSent}, lv{"failed", s.MsgsFailed}, lv{"delivered", s.MsgsDelivered})
		counters(ch, dConnsEv,
			lv{"opened", s.ConnsOpened}, lv{"accepted", s.ConnsAccepted}, lv{"closed", s.ConnsClosed},
			lv{"aborted", s.ConnsAborted}, lv{"evicted", s.ConnsEvicted}, lv{"expired", s.ConnsExpired},
		)
		counters(ch, dICMP,
			lv{"acted", s.UnreachableActed}, lv{"ignored", s.UnreachableIgnored},
			lv{"no_conn", s.UnreachableNoConn},
		)
		a := &s.Auth
		counters(ch, dAuth,
			lv{"failed", a.Failed}, lv{"replayed", a.Replayed}, lv{"unsealed", a.Unsealed},
			lv{"stale", a.Stale}, lv{"sessions_full", a.Refused}, lv{"no_key", a.NoKey},
		)
		counters(ch, dAuthTrim, lv{"used", a.TrimHints}, lv{"ignored", a.TrimIgnored})
		gauge(ch, dAuthSess, float64(a.Sessions))
		counter(ch, dAuthRekey, a.Rekeys)
		gauge(ch, dBuffered, float64(s.RecvBuffered))
		gauge(ch, dConnHeld, float64(s.ConnHeld))
		gauge(ch, dTimeWait, float64(s.TimeWait))
		gauge(ch, dTWHeld, float64(s.TimeWaitHeld))
		counter(ch, dTWRefused, s.TimeWaitRefused)
		gauge(ch, dBufMax, float64(s.RecvBufferedMax))
		buckets := make(map[float64]uint64, transport.RTTBuckets)
		var cum uint64
		for i, n := range s.RTTHist {
			cum += n
			if i < transport.RTTBuckets-1 {
				buckets[float64(transport.RTTBucketBound(i))/1e9] = cum
			}
		}
		// The engine keeps no sum of samples: estimate it from bucket midpoints.
		var sum float64
		for i, n := range s.RTTHist {
			lo := 0.0
			if i > 0 {
				lo = float64(transport.RTTBucketBound(i - 1))
			}
			sum += float64(n) * (lo + float64(transport.RTTBucketBound(i))) / 2 / 1e9
		}
		ch <- prometheus.MustNewConstHistogram(dRTT, cum, sum, buckets)
	}
	if src.Conns != nil {
		cs := src.Conns()
		gauge(ch, dConns, float64(len(cs)))
		quick, freezes := m.totals.update(cs)
		counter(ch, dFreezes, freezes)
		counter(ch, dQuick, quick)
		for _, ci := range cs {
			if !src.PerConn {
				break
			}
			l := []string{strconv.FormatUint(uint64(ci.ID), 16), ci.Peer.String()}
			counter(ch, dCQuick, ci.QuickAdapts, l...)
			counter(ch, dCCuts, ci.CCCuts, l...)
			gauge(ch, dCWindow, float64(ci.Window), l...)
			gauge(ch, dCRate, float64(ci.PacingRate), l...)
			gauge(ch, dCSRTT, float64(ci.SRTT)/1e9, l...)
			gauge(ch, dCRTO, float64(ci.RTO)/1e9, l...)
			gauge(ch, dCInflight, float64(ci.InFlight), l...)
			gauge(ch, dCQueued, float64(ci.QueuedMsgs), l...)
			gauge(ch, dCRecvBufs, float64(ci.RecvBuffers), l...)
			f := 0.0
			if ci.Freezing {
				f = 1
			}
			gauge(ch, dCFreezing, f, l...)
			counter(ch, dCFreezes, ci.FreezeEpisodes, l...)
		}
	}
	if src.API != nil {
		a := src.API()
		gauge(ch, dAPISess, float64(a.Sessions))
		gauge(ch, dAPIRings, float64(a.RingSessions))
		gauge(ch, dAPIOut, float64(a.Outstanding))
		gauge(ch, dAPIQueued, float64(a.RecvQueued))
		counters(ch, dAPI,
			lv{"session_evicted", a.SessionsEvicted}, lv{"bad_destination", a.BadDestination},
			lv{"outstanding_refused", a.OutstandingRefused},
			lv{"outstanding_refused_total", a.OutstandingRefusedTotal},
			lv{"recv_overflow_total", a.RecvOverflowTotal}, lv{"read_timeout", a.ReadTimeouts},
			lv{"session_opened", a.SessionsTotal}, lv{"client_refused", a.ClientsRefused},
			lv{"message_accepted", a.MsgsAccepted}, lv{"message_rejected", a.MsgsRejected},
			lv{"message_delivered", a.MsgsDelivered}, lv{"undeliverable", a.Undeliverable},
			lv{"recv_overflow", a.RecvOverflow}, lv{"bad_envelope", a.BadEnvelope},
			lv{"protocol_error", a.ProtocolErrors}, lv{"client_vanished", a.ClientsVanishd},
			lv{"client_stalled", a.ClientsStalled}, lv{"message_memfd", a.MsgsFD},
			lv{"message_ring", a.RingMsgs}, lv{"ring_fallback", a.RingFallback},
			lv{"ring_refused", a.RingRefused}, lv{"ring_bad_release", a.RingBadReleases},
			lv{"recv_paused", a.RecvPaused}, lv{"ring_displaced", a.RingDisplaced},
			lv{"control_refused", a.ControlRefused},
		)
		counters(ch, dAPIBytes, lv{"accepted", a.BytesAccepted}, lv{"delivered", a.BytesDelivered})
	}
	if src.Decisions != nil {
		d := src.Decisions()
		buckets := make(map[float64]uint64, timing.NumBuckets)
		var cum uint64
		for i, n := range d.Hist.Buckets[:timing.NumBuckets-1] {
			cum += n
			buckets[float64(uint64(1)<<i)/1e9] = cum
		}
		ch <- prometheus.MustNewConstHistogram(dDecision, d.Hist.Count, float64(d.Hist.Sum)/1e9, buckets)
		counter(ch, dOverruns, d.Overruns)
		gauge(ch, dBudget, float64(d.Budget)/1e9)
	}
	if src.Socket != nil {
		src.Socket(ch)
	}
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// Serve serves /metrics on addr ("host:port") until ctx ends; it returns the bound address.
func (m *Metrics) Serve(ctx context.Context, addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err
		}
	}()
	go func() {
		<-ctx.Done()
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		hs.Shutdown(c)
	}()
	return ln.Addr(), nil
}
