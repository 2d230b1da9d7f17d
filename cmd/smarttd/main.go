// Command smarttd is the smartt daemon: it speaks the smartt protocol over UDP on one local
// address and serves applications through a Unix-socket API (docs/api.md).
//
//	smarttd -config /etc/smartt/smarttd.yaml [-listen ADDR:PORT] [-socket PATH] [-metrics HOST:PORT]
//	smarttd -version
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
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"

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
	file := fs.String("config", "", "YAML config file (default: the built-in defaults; see -print-config)")
	listen := fs.String("listen", "", "UDP ADDR:PORT peers send to (overrides listen:)")
	socket := fs.String("socket", "", "API Unix socket path (overrides api.socket)")
	metrics := fs.String("metrics", "", "HOST:PORT of /metrics (overrides metrics:)")
	level := fs.String("log-level", "", "debug, info, warn or error (overrides log_level:)")
	printCfg := fs.Bool("print-config", false, "print the default config (commented YAML) and exit")
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
	if *printCfg {
		_, err := out.Write(smarttd.DefaultYAML)
		return err
	}
	var data []byte
	if *file != "" {
		var err error
		if data, err = os.ReadFile(*file); err != nil {
			return err
		}
	}
	cfg, err := smarttd.Load(data)
	if err != nil && *file != "" {
		return fmt.Errorf("%s: %w", *file, err)
	}
	if *listen != "" {
		if cfg.Listen, err = netip.ParseAddrPort(*listen); err != nil {
			return fmt.Errorf("-listen %q: want ADDR:PORT: %v", *listen, err)
		}
	}
	if *socket != "" {
		cfg.API.Socket = *socket
	}
	if *metrics != "" {
		cfg.Metrics = *metrics
	}
	if *level != "" {
		cfg.LogLevel = *level
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	d, err := smarttd.Start(cfg, smarttd.Options{})
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	// Without NOTIFY_SOCKET (not under systemd) these do nothing.
	sd.SdNotify(false, fmt.Sprintf("%s\nSTATUS=listening on %v, API %s", sd.SdNotifyReady, cfg.Listen, cfg.API.Socket))
	done := make(chan struct{})
	defer close(done)
	if wd, err := sd.SdWatchdogEnabled(false); err == nil && wd > 0 {
		go watchdog(d, wd/2, done)
	}
	select {
	case <-sig:
	case <-stop:
	}
	sd.SdNotify(false, sd.SdNotifyStopping+"\nSTATUS=shutting down")
	return d.Shutdown(context.Background())
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
