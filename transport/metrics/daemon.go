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
	counters(ch, dSockB, lv{"rx", st.RxBytes}, lv{"tx", st.TxBytes})
	counters(ch, dSockErr, lv{"rx", st.RxErrors}, lv{"tx", st.TxErrors})
	counters(ch, dSockECN, lv{"ect", st.RxECT}, lv{"ce", st.RxCE})
	counter(ch, dSockNoTS, st.RxNoKernelStamp)
	counters(ch, dSockTx,
		lv{"sampled", st.TxStampsSampled}, lv{"matched", st.TxStampsMatched},
		lv{"lost", st.TxStampsLost},
	)
	counter(ch, dSockGRO, st.RxGROBuffers)
	counter(ch, dSockBusy, st.RxBusyPollHits)
	counter(ch, dSockBig, st.TxTooBig)
	counters(ch, dSockICMP,
		lv{"read", st.RxICMPUnreachable}, lv{"dropped", st.RxICMPDropped}, lv{"lost", st.RxICMPLost},
	)
	counters(ch, dSockStray, lv{"received", st.RxStrays}, lv{"reset", st.TxStrayResets})
	counters(ch, dSockGSO, lv{"messages", st.TxGSOMessages}, lv{"segments", st.TxGSOSegments})
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
