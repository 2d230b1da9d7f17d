package smarttd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"time"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/hwprofile"
	"github.com/smartt-transport/smartt/reps"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/udp"
	"github.com/smartt-transport/smartt/version"
)

// SocketLayer is an open socket layer and what it reports.
type SocketLayer struct {
	Socket daemon.Socket // shard 0's socket
	// Shards holds every engine shard's socket (Shards[0] is Socket) when the daemon runs
	// more than one shard; nil: one.
	Shards   []daemon.Socket
	Caps     func() any // capabilities, for /v1/capabilities and metrics (may be nil)
	Counters func() any // counters, for /v1/counters and metrics (may be nil)
	TxDelay  *DelayHist // send-path delay of sampled packets (may be nil)
}

// sockets returns every shard's socket.
func (sl *SocketLayer) sockets() []daemon.Socket {
	if len(sl.Shards) > 0 {
		return sl.Shards
	}
	return []daemon.Socket{sl.Socket}
}

// close closes every shard's socket.
func (sl *SocketLayer) close() {
	for _, s := range sl.sockets() {
		s.Close()
	}
}

// Options are what a caller supplies besides the config.
type Options struct {
	Logger *slog.Logger
	// OpenSocket opens the socket layer (default: transport/udp on cfg.Listen). It runs on
	// the calling goroutine, so a test can start a daemon inside a network namespace.
	OpenSocket func(cfg *Config, log *slog.Logger) (*SocketLayer, error)
	Seed       uint64 // engine random seed (0: from the clock)
	// Cgroup is where memory_limit: auto reads the cgroup's limit (nil: HostCgroup).
	Cgroup *CgroupFS
	// Metrics makes the daemon's metrics exporter (cmd/smarttd: metrics.ForDaemon, the
	// Prometheus one). smarttd links no exporter itself, so that a program embedding
	// daemons without serving metrics (the operator CLI's demo) does not link one. nil:
	// none, and a config with metrics: set is refused.
	Metrics func(d *Daemon) Exporter
}

// Exporter keeps and serves a daemon's metrics.
type Exporter interface {
	ObserveBatch(n, stamped int)              // once per receive batch
	ObserveMessage(elapsedNs int64, size int) // once per message sent
	// Refresh reads the live connections' counters (every second while serving).
	Refresh()
	// Serve serves the metrics on addr ("host:port") until ctx ends and returns the
	// bound address.
	Serve(ctx context.Context, addr string) (net.Addr, error)
}

// limitText describes a memory limit for the start line.
func limitText(limit int64, where string) string {
	if limit <= 0 {
		return "none"
	}
	return config.HumanSize(limit) + " (" + where + ")"
}

// Daemon is a running smarttd.
type Daemon struct {
	Config      Config
	Node        *daemon.Node
	API         *api.Server
	Metrics     Exporter // nil without Options.Metrics
	MetricsAddr net.Addr // bound /metrics address, nil when off
	Socket      *SocketLayer
	// Memory is the worst-case memory of the config as it runs (after memory_fit: scale),
	// MemoryLimit what it had to fit (0: none).
	Memory      MemoryBound
	MemoryLimit int64
	// REPSRun is the EV run length the engine runs (reps.run, auto resolved: ResolveRun).
	REPSRun     int
	log         *slog.Logger
	stopMetrics context.CancelFunc
	stopRelease context.CancelFunc
}

// Start opens the sockets, starts the engine, the API and the metrics endpoint.
func Start(cfg Config, o Options) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Transport.CheckLinked(); err != nil {
		return nil, fmt.Errorf("transport.%w", err)
	}
	if cfg.Metrics != "" && o.Metrics == nil {
		return nil, fmt.Errorf("metrics = %q: this program serves no metrics (smarttd does); set metrics: \"\"", cfg.Metrics)
	}
	log := o.Logger
	if log == nil {
		log = cfg.NewLogger(os.Stderr)
	}
	cg := HostCgroup
	if o.Cgroup != nil {
		cg = *o.Cgroup
	}
	limit, where, err := resolveMemoryLimit(&cfg, cg)
	if err != nil {
		return nil, err
	}
	bound, scaled, err := fitMemory(&cfg, limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if scaled != "" {
		log.Warn("memory_fit: scale: budgets "+scaled, "limit_from", where)
	}
	open := o.OpenSocket
	if open == nil {
		open = OpenUDP
	}
	sl, err := open(&cfg, log)
	if err != nil {
		return nil, fmt.Errorf("sockets on %v: %w", cfg.Listen, err)
	}
	if k := len(sl.sockets()); k != cfg.Shards.N() {
		sl.close()
		return nil, fmt.Errorf("sockets on %v: the socket layer opened %d shards, shards = %v asks for %d", cfg.Listen, k, cfg.Shards, cfg.Shards.N())
	}
	d := &Daemon{Config: cfg, Socket: sl, log: log, Memory: bound, MemoryLimit: limit}
	info := api.Info{Version: version.String(), Listen: cfg.Listen, Config: cfg.View(), Caps: sl.Caps, Counters: sl.Counters,
		MemoryBound: bound.Total, MemoryLimit: limit}
	d.API, err = api.NewServer(cfg.API, info, log)
	if err != nil {
		sl.close()
		return nil, err
	}
	tcfg := cfg.Transport
	tcfg.ListenPort = cfg.Listen.Port()
	tcfg.REPS.Run = reps.RunLen(d.resolveRun())
	hooks := transport.Hooks{
		// Received messages go to the API in the chunks they were received into (written
		// to the client with writev), not assembled into a fresh buffer.
		DeliverChunks: true,
		// Large messages for a session with a receive ring go straight into its ring.
		Placer: d.API,
		// A session whose queue is full has new messages for it refused at their first
		// packet (receiver not ready), and every destination endpoint of a peer gets a
		// connection of its own (Lane), so that refusals stall the traffic to that
		// endpoint alone.
		Gate: d.API,
	}
	var lane func([]byte) uint32
	if cfg.API.RecvBackpressure {
		lane = api.Lane
	}
	var budget int64
	if tcfg.Profile != "" {
		p, err := hwprofile.Lookup(tcfg.Profile)
		if err != nil {
			sl.close()
			return nil, fmt.Errorf("transport.profile: %w", err)
		}
		budget = p.DecisionNs
	}
	var m Exporter = noExporter{}
	d.Node, err = daemon.NewShards(tcfg, sl.sockets(), daemon.Options{
		Hooks:         hooks,
		TimeDecisions: cfg.DecisionTiming, DecisionBudget: budget,
		BatchSize: cfg.UDP.BatchSize, Logger: log, Seed: o.Seed, GatherBatch: cfg.UDP.GatherBatch, CopyPayload: cfg.UDP.CopyPayload,
		OnReceive: d.API.Deliver, Lane: lane,
		OnBatch: func(n, stamped int) { m.ObserveBatch(n, stamped) },
		OnComplete: func(r daemon.SendResult, size int) {
			if r.Err == nil {
				m.ObserveMessage(r.Elapsed, size)
			}
		},
	})
	if err != nil {
		sl.close()
		return nil, err
	}
	node := d.Node
	if o.Metrics != nil {
		d.Metrics = o.Metrics(d)
		m = d.Metrics
	}
	if err := d.API.Start(node); err != nil {
		sl.close()
		return nil, err
	}
	node.Start()
	rctx, stopRelease := context.WithCancel(context.Background())
	d.stopRelease = stopRelease
	go d.runReleaser(rctx)
	if cfg.Metrics != "" {
		if err := d.serveMetrics(); err != nil {
			d.Shutdown(context.Background())
			return nil, err
		}
	}
	metricsAt := "off"
	if d.MetricsAddr != nil {
		metricsAt = d.MetricsAddr.String()
	}
	log.Info("smarttd started", "version", version.String(), "revision", version.Get().Revision, "listen", cfg.Listen, "api", cfg.API.Socket,
		"metrics", metricsAt, "cc", tcfg.CC, "lb", tcfg.LB, "reps_run", d.REPSRun, "shards", node.NumShards(), "procs", runtime.GOMAXPROCS(0),
		"memory_bound", config.HumanSize(bound.Total), "memory_limit", limitText(limit, where))
	log.Info("worst-case memory "+bound.String(), "bytes", bound.Total)
	return d, nil
}

// resolveRun resolves reps.run on the opened socket layer (Config.ResolveRun), logs an
// auto's outcome and records it in d.REPSRun.
func (d *Daemon) resolveRun() int {
	var caps udp.Caps
	if d.Socket.Caps != nil {
		caps, _ = d.Socket.Caps().(udp.Caps)
	}
	run, why := d.Config.ResolveRun(caps.Datapath, caps.GSO)
	if d.Config.Transport.REPS.Run == reps.RunAuto {
		d.log.Info("reps.run auto", "run", run, "why", why)
	}
	d.REPSRun = run
	return run
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
	d.stopRelease()
	d.log.Info("smarttd stopped", "took", time.Since(start).Round(time.Millisecond))
	return err
}

// serveMetrics serves the exporter on cfg.Metrics and refreshes it every second: the
// counters of a connection that closes between scrapes still count in the totals.
func (d *Daemon) serveMetrics() error {
	ctx, cancel := context.WithCancel(context.Background())
	d.stopMetrics = cancel
	m := d.Metrics
	go func() {
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
	var err error
	if d.MetricsAddr, err = m.Serve(ctx, d.Config.Metrics); err != nil {
		return fmt.Errorf("metrics = %q: %w", d.Config.Metrics, err)
	}
	return nil
}

// noExporter is the exporter of a daemon without one: it drops what it is given.
type noExporter struct{}

func (noExporter) ObserveBatch(int, int)                           {}
func (noExporter) ObserveMessage(int64, int)                       {}
func (noExporter) Refresh()                                        {}
func (noExporter) Serve(context.Context, string) (net.Addr, error) { return nil, nil }
