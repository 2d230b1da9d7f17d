package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/bedrun"
	"github.com/smartt-transport/smartt/test/netbed"
)

// bindTestbedSoak: "testbed soak" runs a soak (test/bedrun): a mixed workload under flaky links, link flaps
// and a daemon restart, then the exactly-once tally and the memory check. It fails when
// the soak found a violation.
func bindTestbedSoak(fs *pflag.FlagSet) cli.RunFunc {
	name := fs.String("name", "soak", "testbed name: namespaces are smartt-<name>-<node> (removed afterwards)")
	duration := fs.Duration("duration", 0, "workload duration (0: the scenario's, 5m in the default); a shorter one scales warmup and cooldown with it")
	seed := fs.Uint64("seed", 0, "random seed of the workload and the faults (0: the scenario's)")
	lb := fs.String("lb", "", "load balancer (transport lb): ecmp, ops, reps, ...")
	cc := fs.String("cc", "", "congestion controller (transport cc)")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	verbose := fs.BoolP("verbose", "v", false, "daemon warnings to stderr")
	return func(args []string, out io.Writer) error {
		var sc *bedrun.SoakScenario
		var err error
		switch len(args) {
		case 0:
			sc, err = bedrun.ParseSoak(nil)
		case 1:
			sc, err = bedrun.LoadSoak(args[0])
		}
		if err != nil {
			return err
		}
		if *seed != 0 {
			sc.Seed = *seed
		}
		if *lb != "" {
			sc.Transport.LB = *lb
		}
		if *cc != "" {
			sc.Transport.CC = *cc
		}
		if d := config.Duration(*duration); d > 0 {
			c := &sc.Soak
			if d < c.Duration {
				f := float64(d) / float64(c.Duration)
				c.Warmup = config.Duration(float64(c.Warmup) * f)
				c.Cooldown = config.Duration(float64(c.Cooldown) * f)
			}
			c.Duration = d
		}
		if err := sc.Check(); err != nil {
			return err
		}
		if err := os.MkdirAll(netbed.StateDir, 0o755); err != nil {
			return err
		}
		// The first interrupt ends the workload early (the soak still drains, checks, reports
		// and removes its testbed); the next one kills the process as usual.
		interrupt := make(chan struct{})
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		go func() {
			if _, ok := <-sig; ok {
				signal.Stop(sig)
				close(interrupt)
			}
		}()
		defer func() { signal.Stop(sig); close(sig) }()
		o := bedrun.SoakOptions{Name: *name, Progress: out, Control: bedrun.ControlPath(netbed.StateDir, *name), Interrupt: interrupt}
		if *verbose {
			o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}
		c := &sc.Soak
		fmt.Fprintf(out, "soak %s (seed %d): %v of workload, then a drain of at most %v; faults between %v and %v; testbed %s\n",
			sc.Name, sc.Seed, c.Duration, c.Drain, c.Warmup, c.Duration-c.Cooldown, *name)
		t0 := time.Now()
		rep, err := bedrun.Soak(sc, o)
		if rep != nil {
			fmt.Fprintln(out)
			rep.Write(out)
			fmt.Fprintf(out, "(%v in all)\n", time.Since(t0).Round(time.Second))
			if *jsonOut != "" {
				b, jerr := json.MarshalIndent(rep, "", "  ")
				if jerr == nil {
					jerr = os.WriteFile(*jsonOut, b, 0o644)
				}
				err = errors.Join(err, jerr)
			}
		}
		if err != nil {
			return err
		}
		if n := len(rep.Violations); n > 0 {
			return fmt.Errorf("soak: %d violation(s)", n)
		}
		return nil
	}
}
