package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
	"github.com/smartt-transport/smartt/transport/udp"
)

// ForDaemon is the Prometheus exporter of a daemon (smarttd.Options.Metrics): the
// engine, connections, API, decision timing, socket layer and, with several engine
// shards, per-shard series.
func ForDaemon(d *smarttd.Daemon) smarttd.Exporter {
	node := d.Node
	return New(Sources{
		Engine:    node.Stats,
		Conns:     func() []transport.ConnInfo { return node.Conns(nil) },
		API:       d.API.Stats,
		Socket:    func(ch chan<- prometheus.Metric) { collectSocket(ch, d.Socket); collectShards(ch, node) },
		CC:        d.Config.Transport.CC,
		LB:        d.Config.Transport.LB,
		PerConn:   d.Config.MetricsPerConnection,
		Decisions: node.Decisions,
	})
}

var (
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
)

// collectShards writes per-shard series when the node runs more than one shard (the
// engine's own series are summed over shards).
func collectShards(ch chan<- prometheus.Metric, node *daemon.Node) {
	if node.NumShards() == 1 {
		return
	}
	for i, s := range node.Shards() {
		id := strconv.Itoa(i)
		counter(ch, dShardPkts, s.Engine.PacketsSent, id, "tx")
		counter(ch, dShardPkts, s.Engine.PacketsRecv, id, "rx")
		counter(ch, dShardHand, s.HandedOut, id, "out")
		counter(ch, dShardHand, s.Adopted, id, "in")
		counter(ch, dShardHand, s.HandoffDrops, id, "dropped")
		counter(ch, dShardHand, s.HandoffDropsUnknown, id, "dropped_unknown")
		gauge(ch, dShardConns, float64(s.Conns), id)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// collectSocket writes the UDP socket layer's metrics: capabilities, counters (summed
// over shards) and the send-path delay. Other socket layers (in-memory) have none.
func collectSocket(ch chan<- prometheus.Metric, sl *smarttd.SocketLayer) {
	if sl.Caps == nil || sl.Counters == nil {
		return
	}
	caps, ok1 := sl.Caps().(udp.Caps)
	st, ok2 := sl.Counters().(udp.Stats)
	if !ok1 || !ok2 {
		return
	}
	g := func(d *prometheus.Desc, v bool, l string) { gauge(ch, d, b2f(v), l) }
	g(dCap, caps.ECN, "ecn")
	g(dCap, caps.RxTimestamps, "rx_timestamps")
	g(dCap, caps.TxTimestamps, "tx_timestamps")
	g(dCap, caps.Batch, "batch")
	g(dCap, caps.GSO, "gso")
	g(dCap, caps.GRO, "gro")
	g(dCap, caps.DF, "df")
	g(dCap, caps.Datapath == udp.DatapathAFXDP, "afxdp")
	gauge(ch, dLinkMTU, float64(caps.LinkMTU))
	gauge(ch, dTSSource, 1, caps.TimestampSource)
	gauge(ch, dSockBuf, float64(caps.RecvBuffer), "rx")
	gauge(ch, dSockBuf, float64(caps.SendBuffer), "tx")
	counter(ch, dSockB, st.RxBytes, "rx")
	counter(ch, dSockB, st.TxBytes, "tx")
	counter(ch, dSockErr, st.RxErrors, "rx")
	counter(ch, dSockErr, st.TxErrors, "tx")
	counter(ch, dSockECN, st.RxECT, "ect")
	counter(ch, dSockECN, st.RxCE, "ce")
	counter(ch, dSockNoTS, st.RxNoKernelStamp)
	counter(ch, dSockTx, st.TxStampsSampled, "sampled")
	counter(ch, dSockTx, st.TxStampsMatched, "matched")
	counter(ch, dSockTx, st.TxStampsLost, "lost")
	counter(ch, dSockGRO, st.RxGROBuffers)
	counter(ch, dSockBusy, st.RxBusyPollHits)
	counter(ch, dSockBig, st.TxTooBig)
	counter(ch, dSockICMP, st.RxICMPUnreachable, "read")
	counter(ch, dSockICMP, st.RxICMPDropped, "dropped")
	counter(ch, dSockICMP, st.RxICMPLost, "lost")
	counter(ch, dSockStray, st.RxStrays, "received")
	counter(ch, dSockStray, st.TxStrayResets, "reset")
	counter(ch, dSockGSO, st.TxGSOMessages, "messages")
	counter(ch, dSockGSO, st.TxGSOSegments, "segments")
	if sl.TxDelay != nil {
		ch <- delayHistogram(sl.TxDelay)
	}
}

// delayHistogram is h as a Prometheus histogram in seconds.
func delayHistogram(h *smarttd.DelayHist) prometheus.Metric {
	counts, sumNs := h.Snapshot()
	buckets := make(map[float64]uint64, smarttd.DelayBuckets)
	var cum uint64
	for i, n := range counts[:smarttd.DelayBuckets] {
		cum += n
		buckets[float64(smarttd.DelayBound(i))/1e9] = cum
	}
	return prometheus.MustNewConstHistogram(dTxDelay, cum+counts[smarttd.DelayBuckets], float64(sumNs)/1e9, buckets)
}
