// Command smarttd is the smartt daemon: it speaks the smartt protocol over UDP on one local
// address and serves applications through a Unix-socket API (docs/api.md).
//
//	smarttd -config /etc/smartt/smarttd.yaml [-listen ADDR:PORT] [-socket PATH] [-metrics HOST:PORT]
//	smarttd -version
//
// SIGTERM or SIGINT shuts it down gracefully: no new clients or messages, outstanding
// messages get shutdown_timeout to finish, the rest fail with a notification to their clients.
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

	"smartt/transport/smarttd"
	"smartt/version"
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
	select {
	case <-sig:
	case <-stop:
	}
	return d.Shutdown(context.Background())
}
