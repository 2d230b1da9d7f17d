package smarttd

import (
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/udp"
)

// UDPConfigFor returns the socket layer's config for c.
func UDPConfigFor(c *Config, log *slog.Logger) udp.Config {
	u := c.UDP
	dp, _ := c.ResolveDatapath()
	return udp.Config{Listen: c.Listen, EVPortBase: u.EVPortBase, EVS: c.Transport.EVS, Carrier: u.Carrier, Datapath: dp,
		DataDSCP: u.DataDSCP, ControlDSCP: u.ControlDSCP, DisableECN: u.DisableECN,
		DisableTimestamps: u.DisableTimestamps, DisableBatch: u.DisableBatch, DisableGSO: u.DisableGSO, DisableGRO: u.DisableGRO, GROInPlace: u.GROInPlace, BusyPoll: time.Duration(u.BusyPoll), DisableDF: u.DisableDF, TxTimestampEvery: u.TxTimestampEvery,
		MaxDatagram: c.MaxDatagram(), HeaderBytes: c.MaxDatagram() - c.Transport.MTU,
		RecvBuffer: u.RecvBuffer, SendBuffer: u.SendBuffer, BatchSize: u.BatchSize, Logger: log}
}

// udpKeys names the socket layer's Go fields in its errors by the YAML keys they come from.
var udpKeys = strings.NewReplacer("Config.Listen", "listen", "Config.EVPortBase", "udp.ev_port_base",
	"Config.Carrier", "udp.carrier", "Config.Datapath", "udp.datapath", "Config.EVS", "transport.evs",
	"Config.RecvBuffer", "udp.recv_buffer", "Config.SendBuffer", "udp.send_buffer",
	"Config.BatchSize", "udp.batch_size", "Config.BusyPoll", "udp.busy_poll", "EVPortBase", "udp.ev_port_base", "EVS", "transport.evs")

// yamlKeyError is a socket layer's error worded with YAML keys; errors.As still finds
// what it wraps (udp.MTUError).
type yamlKeyError struct{ err error }

// Error implements error.
func (e yamlKeyError) Error() string { return udpKeys.Replace(e.err.Error()) }

// Unwrap returns the socket layer's error.
func (e yamlKeyError) Unwrap() error { return e.err }

// OpenUDP opens the transport/udp socket layer on cfg.Listen (in the network namespace of
// the calling thread): one set of sockets per engine shard (cfg.Shards), sharing the
// listen and EV ports, steered by cfg.UDP.ShardSteering.
func OpenUDP(cfg *Config, log *slog.Logger) (*SocketLayer, error) {
	if dp, why := cfg.ResolveDatapath(); cfg.UDP.Datapath == udp.DatapathAuto {
		log.Info("udp.datapath auto", "socket_layer", dp, "why", why)
	}
	conns, err := udp.OpenShards(UDPConfigFor(cfg, log), cfg.Shards.N(), cfg.UDP.ShardSteering)
	if err != nil {
		return nil, yamlKeyError{err}
	}
	if len(conns) == 1 {
		return UDPLayer(conns[0]), nil
	}
	return UDPShardLayer(conns), nil
}

// UDPShardLayer wraps the socket layers of several engine shards (udp.OpenShards): one
// daemon socket each, capabilities of shard 0, counters and metrics summed.
func UDPShardLayer(conns []*udp.Conn) *SocketLayer {
	txDelay := new(DelayHist)
	socks := make([]*udpSocket, len(conns))
	sl := &SocketLayer{TxDelay: txDelay}
	for i, c := range conns {
		socks[i] = newUDPSocket(c, txDelay)
		sl.Shards = append(sl.Shards, socks[i])
	}
	sl.Socket = sl.Shards[0]
	sum := func() udp.Stats {
		var st udp.Stats
		for _, c := range conns {
			x := c.Stats()
			daemon.AddCounters(&st, &x)
		}
		return st
	}
	sl.Caps = func() any { return conns[0].Caps() }
	sl.Counters = func() any { return sum() }
	return sl
}

func newUDPSocket(c *udp.Conn, txDelay *DelayHist) *udpSocket {
	s := &udpSocket{c: c, stop: make(chan struct{}), txDelay: txDelay}
	go s.pollTxStamps()
	return s
}

// udpSocket adapts a udp.Conn to daemon.Socket (the same Packet type: nothing copied).
type udpSocket struct {
	c    *udp.Conn
	up   []udp.Unreachable // WaitUnreachable's
	stop chan struct{}
	once sync.Once
	// send-path delay (kernel TX timestamp minus user send time) of sampled packets
	txDelay *DelayHist
}

// UDPLayer wraps an open udp.Conn as a daemon socket layer with its capabilities,
// counters and metrics.
func UDPLayer(c *udp.Conn) *SocketLayer {
	s := newUDPSocket(c, new(DelayHist))
	return &SocketLayer{Socket: s, Caps: func() any { return c.Caps() }, Counters: func() any { return c.Stats() },
		TxDelay: s.txDelay}
}

func (s *udpSocket) pollTxStamps() {
	buf := make([]udp.TxStamp, 256)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		for {
			n := s.c.TxStamps(buf)
			for _, st := range buf[:n] {
				if st.KernTime >= st.UserTime {
					s.txDelay.Observe(st.KernTime - st.UserTime)
				}
			}
			if n < len(buf) {
				break
			}
		}
	}
}

// ReadBatch implements daemon.Socket: on the AF_XDP datapath the datagrams stay where
// they arrived, in the UMEM (udp.Conn.ReadBatchInPlace), which daemon.Socket allows.
// daemon.Packet is udp.Packet: the batch passes through uncopied.
func (s *udpSocket) ReadBatch(pkts []daemon.Packet) (int, error) { return s.c.ReadBatchInPlace(pkts) }

// TxBuffers implements daemon.TxBufferer (udp.Conn.TxBuffers).
func (s *udpSocket) TxBuffers(pkts []daemon.Packet) int { return s.c.TxBuffers(pkts) }

// WriteBatch implements daemon.Socket.
func (s *udpSocket) WriteBatch(pkts []daemon.Packet) (int, error) { return s.c.WriteBatch(pkts) }

// WaitUnreachable implements daemon.UnreachableSource (udp.Conn.WaitUnreachable).
func (s *udpSocket) WaitUnreachable(dst []daemon.Unreachable) (int, error) {
	if len(s.up) < len(dst) {
		s.up = make([]udp.Unreachable, len(dst))
	}
	n, err := s.c.WaitUnreachable(s.up[:len(dst)])
	for i, u := range s.up[:n] {
		dst[i] = daemon.Unreachable{Peer: u.Dst, Cause: transport.UnreachableHost}
		if u.Port {
			dst[i].Cause = transport.UnreachablePort
		}
	}
	return n, err
}

// GathersPayload implements daemon.PayloadGatherer (udp.Conn.GathersPayload: the socket
// datapath's port and flow-label carriers).
func (s *udpSocket) GathersPayload() bool { return s.c.GathersPayload() }

// Close implements daemon.Socket.
func (s *udpSocket) Close() error {
	s.once.Do(func() { close(s.stop) })
	return s.c.Close()
}
