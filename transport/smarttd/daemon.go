package smarttd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/smartt-transport/smartt/hwprofile"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/metrics"
	"github.com/smartt-transport/smartt/version"
)

// SocketLayer is an open socket layer and what it reports.
type SocketLayer struct {
	Socket   daemon.Socket
	Caps     func() any                        // capabilities, for /v1/capabilities (may be nil)
	Counters func() any                        // counters, for /v1/counters (may be nil)
	Metrics  func(ch chan<- prometheus.Metric) // metrics (may be nil)
}

// Options are what a caller supplies besides the config.
type Options struct {
	Logger *slog.Logger
	// OpenSocket opens the socket layer (default: transport/udp on cfg.Listen). It runs on
	// the calling goroutine, so a test can start a daemon inside a network namespace.
	OpenSocket func(cfg *Config, log *slog.Logger) (*SocketLayer, error)
	Seed       uint64 // engine random seed (0: from the clock)
}

// Daemon is a running smarttd.
type Daemon struct {
	Config      Config
	Node        *daemon.Node
	API         *api.Server
	Metrics     *metrics.Metrics
	MetricsAddr net.Addr // bound /metrics address, nil when off
	Socket      *SocketLayer
	log         *slog.Logger
	stopMetrics context.CancelFunc
}

// Start opens the sockets, starts the engine, the API and the metrics endpoint.
func Start(cfg Config, o Options) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		level, _ := ParseLevel(cfg.LogLevel)
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	open := o.OpenSocket
	if open == nil {
		open = OpenUDP
	}
	sl, err := open(&cfg, log)
	if err != nil {
		return nil, fmt.Errorf("sockets on %v: %w", cfg.Listen, err)
	}
	d := &Daemon{Config: cfg, Socket: sl, log: log}
	info := api.Info{Version: version.String(), Listen: cfg.Listen, Config: cfg.View(), Caps: sl.Caps, Counters: sl.Counters}
	d.API, err = api.NewServer(cfg.API, info, log)
	if err != nil {
		sl.Socket.Close()
		return nil, err
	}
	tcfg := cfg.Transport
	tcfg.ListenPort = cfg.Listen.Port()
	// Received messages go to the API in the chunks they were received into (written to
	// the client with writev), not assembled into a fresh buffer.
	tcfg.DeliverChunks = true
	var budget int64
	if tcfg.Profile != "" {
		p, err := hwprofile.Lookup(tcfg.Profile)
		if err != nil {
			sl.Socket.Close()
			return nil, fmt.Errorf("transport.profile: %w", err)
		}
		budget = p.DecisionNs
	}
	var m *metrics.Metrics
	d.Node, err = daemon.New(tcfg, sl.Socket, daemon.Options{
		TimeDecisions: cfg.DecisionTiming, DecisionBudget: budget,
		BatchSize: cfg.UDP.BatchSize, Logger: log, Seed: o.Seed, GatherBatch: cfg.UDP.GatherBatch,
		OnReceive: d.API.Deliver,
		OnBatch:   func(n, stamped int) { m.ObserveBatch(n, stamped) },
		OnComplete: func(r daemon.SendResult, size int) {
			if r.Err == nil {
				m.ObserveMessage(r.Elapsed, size)
			}
		},
	})
	if err != nil {
		sl.Socket.Close()
		return nil, err
	}
	node := d.Node
	m = metrics.New(metrics.Sources{
		Engine: node.Stats,
		Conns:  func() []transport.ConnInfo { return node.Conns(nil) },
		API:    d.API.Stats,
		Socket: sl.Metrics,
		CC:     tcfg.CC, LB: tcfg.LB, PerConn: cfg.MetricsPerConnection,
		Decisions: node.Decisions,
	})
	d.Metrics = m
	if err := d.API.Start(node); err != nil {
		sl.Socket.Close()
		return nil, err
	}
	node.Start()
	if cfg.Metrics != "" {
		ctx, cancel := context.WithCancel(context.Background())
		d.stopMetrics = cancel
		go func() { // connection counters summed over closed connections (metrics.Refresh)
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					m.Refresh()
				}
			}
		}()
		if d.MetricsAddr, err = m.Serve(ctx, cfg.Metrics); err != nil {
			d.Shutdown(context.Background())
			return nil, fmt.Errorf("metrics = %q: %w", cfg.Metrics, err)
		}
	}
	metrics := "off"
	if d.MetricsAddr != nil {
		metrics = d.MetricsAddr.String()
	}
	log.Info("smarttd started", "version", version.String(), "revision", version.Get().Revision, "listen", cfg.Listen, "api", cfg.API.Socket,
		"metrics", metrics, "cc", tcfg.CC, "lb", tcfg.LB)
	return d, nil
}

// Shutdown stops accepting clients and messages, lets outstanding messages finish until
// ctx ends (or ShutdownTimeout), fails the rest with a notification to their clients, and
// stops everything.
func (d *Daemon) Shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(d.Config.ShutdownTimeout)) // 0: fail them at once
	defer cancel()
	start := time.Now()
	d.API.BeginShutdown()
	err := d.Node.Shutdown(ctx)
	// Failures and completions are queued to the clients: give them a moment to be written.
	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	d.API.Close(cctx)
	if d.stopMetrics != nil {
		d.stopMetrics()
	}
	d.log.Info("smarttd stopped", "took", time.Since(start).Round(time.Millisecond))
	return err
}
