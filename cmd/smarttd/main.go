// Command smarttd is the smartt daemon: it speaks the smartt protocol over UDP on one local
// address and serves applications through a Unix-socket API (docs/api.md).
//
//	smarttd -config /etc/smartt/smarttd.yaml [-listen ADDR:PORT] [-socket PATH] [-metrics HOST:PORT]
//	smarttd -check-config FILE
//	smarttd -version
//
// -check-config reads and validates FILE and prints the effective config and its
// worst-case memory, or every error (exit status 1). SIGHUP re-reads the config file:
// log_level takes effect, other changed keys are logged as needing a restart, and a
// config that does not load is logged while the daemon runs on.
//
// SIGTERM or SIGINT shuts it down gracefully: no new clients or messages, outstanding
// messages get shutdown_timeout to finish, the rest fail with a notification to their clients.
//
// Under systemd (Type=notify, deploy/systemd/smarttd.service) it reports READY=1 once the
// sockets, the API and the metrics endpoint are up, STOPPING=1 when it begins to shut down,
// and, with WatchdogSec=, WATCHDOG=1 at half the interval for as long as the engine's lock
// can be taken (a wedged datapath stops the pings and systemd restarts it).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"

	"github.com/smartt-transport/smartt/transport/metrics"
	"github.com/smartt-transport/smartt/transport/smarttd"
	"github.com/smartt-transport/smartt/version"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, nil); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "smarttd:", err)
		os.Exit(1)
	}
}

// run parses flags and config, starts the daemon and waits for a signal (or for stop to
// be closed, in tests).
func run(args []string, out io.Writer, stop <-chan struct{}) error {
	fs := flag.NewFlagSet("smarttd", flag.ContinueOnError)
	fs.SetOutput(out)
	var o overrides
	fs.StringVar(&o.file, "config", "", "YAML config file (default: the built-in defaults; see -print-config)")
	fs.StringVar(&o.listen, "listen", "", "UDP ADDR:PORT peers send to (overrides listen:)")
	fs.StringVar(&o.socket, "socket", "", "API Unix socket path (overrides api.socket)")
	fs.StringVar(&o.metrics, "metrics", "", "HOST:PORT of /metrics (overrides metrics:)")
	fs.StringVar(&o.level, "log-level", "", "debug, info, warn or error (overrides log_level:)")
	check := fs.String("check-config", "", "read and validate this config file, print the effective config and its worst-case memory, or every error (exit status 1), and exit")
	printCfg := fs.Bool("print-config", false, "print the default config (commented YAML) and exit; with -config, check that file as -check-config does")
	showVersion := fs.Bool("version", false, "print the version, VCS revision and Go version, and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *showVersion {
		_, err := fmt.Fprintln(out, version.Long("smarttd"))
		return err
	}
	if *printCfg && o.file != "" && *check == "" {
		*check = o.file
	}
	if *check != "" {
		o.file = *check
		return checkConfig(o, out, smarttd.HostCgroup)
	}
	if *printCfg {
		_, err := out.Write(smarttd.DefaultYAML)
		return err
	}
	cfg, err := o.load()
	if err != nil {
		return err
	}
	applyProcs(cfg.Procs)
	level := new(slog.LevelVar)
	l, _ := smarttd.ParseLevel(cfg.LogLevel)
	level.Set(l)
	log := newLogger(cfg.LogFormat, level)
	// Signals are ours before the start line: a SIGHUP right after it must not kill us.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sig)
	d, err := smarttd.Start(cfg, smarttd.Options{Logger: log, Metrics: metrics.ForDaemon})
	if err != nil {
		return err
	}
	setGoMemoryLimit(d, log)
	// Without NOTIFY_SOCKET (not under systemd) these do nothing.
	sd.SdNotify(false, fmt.Sprintf("%s\nSTATUS=listening on %v, API %s", sd.SdNotifyReady, cfg.Listen, cfg.API.Socket))
	done := make(chan struct{})
	defer close(done)
	if wd, err := sd.SdWatchdogEnabled(false); err == nil && wd > 0 {
		go watchdog(d, wd/2, done)
	}
	for running := true; running; {
		select {
		case s := <-sig:
			if s == syscall.SIGHUP {
				reload(o, cfg, level, log)
				continue
			}
			running = false
		case <-stop:
			running = false
		}
	}
	sd.SdNotify(false, sd.SdNotifyStopping+"\nSTATUS=shutting down")
	return d.Shutdown(context.Background())
}

// overrides are the config file and the flags that override its keys.
type overrides struct{ file, listen, socket, metrics, level string }

// load reads the config file (or the defaults), applies the flags and validates.
func (o overrides) load() (smarttd.Config, error) {
	var data []byte
	if o.file != "" {
		var err error
		if data, err = os.ReadFile(o.file); err != nil {
			return smarttd.Config{}, err
		}
	}
	cfg, err := smarttd.Load(data)
	if err != nil {
		if o.file != "" {
			return cfg, fmt.Errorf("%s: %w", o.file, err)
		}
		return cfg, err
	}
	if o.listen != "" {
		if cfg.Listen, err = netip.ParseAddrPort(o.listen); err != nil {
			return cfg, fmt.Errorf("-listen %q: want ADDR:PORT: %v", o.listen, err)
		}
	}
	if o.socket != "" {
		cfg.API.Socket = o.socket
	}
	if o.metrics != "" {
		cfg.Metrics = o.metrics
	}
	if o.level != "" {
		cfg.LogLevel = o.level
	}
	return cfg, cfg.Validate()
}

// checkConfig prints the effective config of o.file and its worst-case memory against the
// memory limit it would run under (cg), or returns every error.
func checkConfig(o overrides, out io.Writer, cg smarttd.CgroupFS) error {
	cfg, err := o.load()
	if err != nil {
		return err
	}
	return smarttd.WriteCheck(out, o.file, &cfg, cg)
}

// setGoMemoryLimit makes the Go collector keep the heap within what the memory limit
// leaves after the kernel's socket memory (which the cgroup charges too), so that garbage
// does not take the process past a limit its live memory fits. GOMEMLIMIT, if set, wins.
func setGoMemoryLimit(d *smarttd.Daemon, log *slog.Logger) {
	if d.MemoryLimit <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	heap := d.MemoryLimit
	for _, it := range d.Memory.Items {
		if it.Name == "udp.socket_buffers" || it.Name == "api.socket_buffer" {
			heap -= it.Bytes
		}
	}
	if heap > 0 {
		debug.SetMemoryLimit(heap)
		log.Info("Go memory limit set", "bytes", heap)
	}
}

// newLogger is the daemon's logger at a level SIGHUP can change.
func newLogger(format string, level *slog.LevelVar) *slog.Logger {
	o := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, o))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, o))
}

// reload re-reads the config on SIGHUP: log_level takes effect; other changes are logged
// as needing a restart; a config that does not load is logged and the daemon runs on.
func reload(o overrides, running smarttd.Config, level *slog.LevelVar, log *slog.Logger) {
	cfg, err := o.load()
	if err != nil {
		log.Error("SIGHUP: config not reloaded, running on with the old one", "err", err)
		return
	}
	l, _ := smarttd.ParseLevel(cfg.LogLevel)
	level.Set(l)
	changed := smarttd.ChangedKeys(&running, &cfg)
	changed = slices.DeleteFunc(changed, func(k string) bool { return k == "log_level" })
	log.Info("SIGHUP: config reloaded", "log_level", cfg.LogLevel, "need_restart", strings.Join(changed, ","))
}

// watchdog tells systemd every interval that the daemon is alive: that the engine's lock
// can be taken (Stats takes it), so a wedged datapath stops the pings.
func watchdog(d *smarttd.Daemon, interval time.Duration, done <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			d.Node.Stats()
			sd.SdNotify(false, sd.SdNotifyWatchdog)
		}
	}
}

// applyProcs sets GOMAXPROCS to the config's procs (0: leaves Go's default).
func applyProcs(n int) {
	if n > 0 {
		runtime.GOMAXPROCS(n)
	}
}
