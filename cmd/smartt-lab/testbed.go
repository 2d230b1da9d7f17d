package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/bedrun"
	"github.com/smartt-transport/smartt/test/netbed"
	"github.com/smartt-transport/smartt/test/uswitch"
)

// testbedUsage is the group's help above cobra's list of its commands (which the list's
// own Short texts keep current: a second, typed list went stale twice).
const testbedUsage = `smartt-lab testbed <command> [flags]   (as root)

Builds a testbed of network namespaces joined by veth links (a pair, a star, a leaf-spine
or a fat tree; Linux routers or the userspace ECN/trimming switches) and runs daemons,
scenarios, soaks and MPI across it (docs/testbed.md).

every command takes --name (default "tb"); up takes the topology flags (see "smartt-lab testbed up -h")
or --spec file.yaml (fields: kind, mode, hosts, hosts_per_leaf, leaves, spines, k,
oversubscription, link_rate, mtu).
`

// nameFlag declares --name (default def): the testbed's namespaces are smartt-NAME-NODE.
func nameFlag(fs *pflag.FlagSet, def string) *string {
	return fs.String("name", def, "testbed name: namespaces are smartt-<name>-<node>")
}

func bindTestbedUp(fs *pflag.FlagSet) cli.RunFunc {
	name := nameFlag(fs, "tb")
	spec := declareTestbedUp(fs)
	return func(_ []string, out io.Writer) error {
		s, err := spec()
		if err != nil {
			return err
		}
		tb, err := netbed.Up(*name, s)
		if err != nil {
			return err
		}
		defer tb.Close()
		fmt.Fprintf(out, "testbed %s up: %s, %d namespaces, %d links\n", *name, describe(tb.Plan.Spec), len(tb.Plan.Nodes), len(tb.Plan.Links))
		return printStatus(tb, out)
	}
}

func bindTestbedDown(fs *pflag.FlagSet) cli.RunFunc {
	name := nameFlag(fs, "tb")
	return func(_ []string, out io.Writer) error {
		left, err := netbed.Namespaces(*name)
		if err != nil {
			return err
		}
		if err := netbed.Remove(*name); err != nil {
			return err
		}
		fmt.Fprintf(out, "testbed %s down: %d namespaces removed\n", *name, len(left))
		return nil
	}
}

func bindTestbedStatus(fs *pflag.FlagSet) cli.RunFunc {
	name := nameFlag(fs, "tb")
	return func(_ []string, out io.Writer) error {
		tb, err := netbed.Open(*name)
		if err != nil {
			if left, _ := netbed.Namespaces(*name); len(left) > 0 {
				return fmt.Errorf("%w; leftover namespaces %v (smartt-lab testbed down -name %s removes them)", err, left, *name)
			}
			return err
		}
		defer tb.Close()
		fmt.Fprintf(out, "testbed %s: %s\n", *name, describe(tb.Plan.Spec))
		return printStatus(tb, out)
	}
}

func bindTestbedSwitch(fs *pflag.FlagSet) cli.RunFunc {
	name := nameFlag(fs, "tb")
	m := netbed.PortModel{Trim: true}
	var queue int64
	var kmin, kmax float64
	cli.SizeVar(fs, &queue, "queue", 64<<10, 0, 1<<30, "data queue per port, bytes, e.g. 64KiB (0: no model, a 1024-frame FIFO)")
	fs.Float64Var(&kmin, "kmin", 0.2, "RED Kmin as a fraction of the data queue")
	fs.Float64Var(&kmax, "kmax", 0.8, "RED Kmax as a fraction of the data queue (0: no marking)")
	fs.BoolVar(&m.Trim, "trim", true, "trim data packets that find the data queue full (false: drop-tail)")
	dscp := fs.Uint("trim-dscp", 0, "DSCP written into trimmed frames (the daemons' transport.trim_dscp)")
	delay := fs.Duration("delay", 0, "propagation delay per link")
	fs.Uint64Var(&m.Seed, "seed", 1, "seed of the per-switch ECMP salts")
	return func(_ []string, out io.Writer) error {
		if *dscp > 63 || kmin < 0 || kmax < 0 || kmax > 1 || (kmax > 0 && kmin >= kmax) {
			return cli.Usagef("testbed switch: need --trim-dscp 0..63 (got %d) and 0 <= kmin < kmax <= 1 (got %v, %v)", *dscp, kmin, kmax)
		}
		m.DataBytes, m.TrimDSCP, m.Delay = int(queue), uint8(*dscp), int64(*delay)
		m.KminBytes, m.KmaxBytes = int(kmin*float64(m.DataBytes)), int(kmax*float64(m.DataBytes))
		return testbedSwitch(*name, m, out)
	}
}

func bindTestbedLink(fs *pflag.FlagSet) cli.RunFunc {
	name := nameFlag(fs, "tb")
	return func(args []string, out io.Writer) error { return testbedLink(*name, args, out) }
}

func bindTestbedFail(fs *pflag.FlagSet) cli.RunFunc {
	name := nameFlag(fs, "tb")
	return func(args []string, out io.Writer) error {
		if err := bedrun.Control(bedrun.ControlPath(netbed.StateDir, *name), args); err != nil {
			return err
		}
		fmt.Fprintf(out, "testbed %s: %s\n", *name, strings.Join(args, " "))
		return nil
	}
}

func bindTestbedExec(fs *pflag.FlagSet) cli.RunFunc {
	name := nameFlag(fs, "tb")
	return func(args []string, out io.Writer) error {
		tb, err := netbed.Open(*name)
		if err != nil {
			return err
		}
		defer tb.Close()
		c := exec.Command(args[1], args[2:]...)
		c.Stdin, c.Stdout, c.Stderr = os.Stdin, out, os.Stderr
		if err := tb.Start(args[0], c); err != nil {
			return err
		}
		return c.Wait()
	}
}

// declareTestbedUp declares the topology flags; the function it returns reads the
// topology from them, or from --spec (the topology flags then not allowed).
func declareTestbedUp(fs *pflag.FlagSet) func() (netbed.Spec, error) {
	var s netbed.Spec
	var specFile string
	rate := config.Rate(0)
	fs.StringVar(&specFile, "spec", "", "YAML topology file (instead of the flags below)")
	fs.StringVar(&s.Kind, "topo", netbed.KindLeafSpine, "pair | star | leafspine | fattree")
	fs.StringVar(&s.Mode, "mode", netbed.ModeKernel, "kernel (Linux routers, ECMP) | emulated (userspace switches: `smartt-lab testbed switch`)")
	fs.IntVar(&s.Hosts, "hosts", 2, "star: hosts on the switch (2..250)")
	fs.IntVar(&s.Leaves, "leaves", 2, "leafspine: leaves (1..250)")
	fs.IntVar(&s.Spines, "spines", 4, "leafspine: spines (1..127)")
	fs.IntVar(&s.HostsPerLeaf, "hosts-per-leaf", 1, "leafspine: hosts per leaf (1..127)")
	fs.IntVarP(&s.K, "k", "k", 4, "fattree: switch radix, even (k leaves of k/2 hosts, k/2 spines)")
	fs.Float64Var(&s.Oversubscription, "oversub", 1, "leafspine: host to uplink capacity ratio (0.01..100)")
	fs.TextVar(&rate, "rate", config.Rate(0), "host link rate, e.g. 1Gbit (0: unshaped); uplinks follow from --oversub")
	fs.IntVar(&s.MTU, "mtu", netbed.DefaultMTU, "MTU of every link (1280..65535)")
	return func() (netbed.Spec, error) {
		s.LinkRate = rate
		if specFile != "" {
			set := 0
			fs.Visit(func(f *pflag.Flag) {
				if f.Name != "spec" && f.Name != "name" {
					set++
				}
			})
			if set > 0 {
				return s, cli.Usagef("--spec and topology flags exclude each other")
			}
			b, err := os.ReadFile(specFile)
			if err != nil {
				return s, err
			}
			s = netbed.Spec{}
			if err := config.DecodeYAML(b, &s); err != nil {
				return s, fmt.Errorf("%s: %w", specFile, err)
			}
		}
		return s.Normalize()
	}
}

func describe(s netbed.Spec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %s mode", s.Kind, s.Mode)
	switch s.Kind {
	case netbed.KindStar:
		fmt.Fprintf(&b, ", %d hosts", s.Hosts)
	case netbed.KindLeafSpine, netbed.KindFatTree:
		fmt.Fprintf(&b, ", %d leaves x %d spines, %d hosts per leaf, oversubscription %g", s.Leaves, s.Spines, s.HostsPerLeaf, s.Oversubscription)
	}
	if s.LinkRate > 0 {
		fmt.Fprintf(&b, ", host links %v, uplinks %v", s.LinkRate, s.UplinkRate())
	}
	fmt.Fprintf(&b, ", mtu %d", s.MTU)
	return b.String()
}

func printStatus(tb *netbed.Testbed, out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "node\tnamespace\taddress\tif\tstate\trx pkts\ttx pkts\trx bytes\ttx bytes\tdrops")
	for _, n := range tb.Plan.Nodes {
		st, err := tb.Stats(n.Name)
		if err != nil {
			return err
		}
		addr := "-"
		if n.Addr.IsValid() {
			addr = n.Addr.String()
		}
		for i, s := range st {
			node, ns := n.Name, tb.Ns(n.Name)
			if i > 0 {
				node, ns, addr = "", "", ""
			}
			state := "down"
			if s.Up && s.Carrier {
				state = "up"
			} else if s.Up {
				state = "no-carrier"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", node, ns, addr, s.If, state,
				s.RxPackets, s.TxPackets, s.RxBytes, s.TxBytes, s.RxDropped+s.TxDropped)
		}
	}
	return w.Flush()
}

func testbedLink(name string, args []string, out io.Writer) error {
	if len(args) < 2 {
		return cli.Usagef("usage: smartt-lab testbed link [--name tb] <link> down|up|rate <rate>|flaky <loss%%> <burst>")
	}
	tb, err := netbed.Open(name)
	if err != nil {
		return err
	}
	defer tb.Close()
	link, op, rest := args[0], args[1], args[2:]
	want := map[string]int{"down": 0, "up": 0, "rate": 1, "flaky": 2}
	n, ok := want[op]
	if !ok {
		return fmt.Errorf("link operation %q unknown (want down, up, rate or flaky)", op)
	}
	if len(rest) != n {
		return fmt.Errorf("link %s takes %d argument(s), got %d", op, n, len(rest))
	}
	switch op {
	case "down":
		err = tb.LinkDown(link)
	case "up":
		err = tb.LinkUp(link)
	case "rate":
		var r config.Rate
		if err = r.UnmarshalText([]byte(rest[0])); err == nil {
			err = tb.SetRate(link, r)
		}
	case "flaky":
		loss, perr := strconv.ParseFloat(strings.TrimSuffix(rest[0], "%"), 64)
		var burst config.Duration
		if perr != nil {
			err = fmt.Errorf("loss %q is not a percentage", rest[0])
		} else if err = burst.UnmarshalText([]byte(rest[1])); err == nil {
			err = tb.Flaky(link, loss, time.Duration(burst))
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "testbed %s: link %s %s %s\n", name, link, op, strings.Join(rest, " "))
	return nil
}

// testbedSwitch runs the userspace switches of an emulated testbed until SIGINT/SIGTERM:
// test/switchport's port model on every port (unless m.DataBytes is 0 on a star) and its
// ECMP hash with a per-switch salt on leaves and spines.
func testbedSwitch(name string, m netbed.PortModel, out io.Writer) error {
	tb, err := netbed.Open(name)
	if err != nil {
		return err
	}
	defer tb.Close()
	if tb.Plan.Spec.Mode != netbed.ModeEmulated {
		return fmt.Errorf("testbed %s is in %s mode; its switches are the kernel's", name, tb.Plan.Spec.Mode)
	}
	var names []string
	var sws []*uswitch.Switch
	var stop func() error
	if m.DataBytes == 0 && tb.Plan.Spec.Kind == netbed.KindStar {
		names, sws, stop, err = tb.RunSwitches(nil, nil)
	} else {
		var f *netbed.Fabric
		if f, err = tb.RunFabric(m); err == nil {
			names, sws, stop = f.Names, f.Sws, f.Stop
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "testbed %s: %d userspace switch(es) running; interrupt to stop\n", name, len(sws))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	signal.Stop(sig)
	runErr := stop()
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "switch\tport\trx frames\ttx frames\tdrops\ttx errors\tcpu")
	for i, sw := range sws {
		for p, port := range tb.SwitchPorts(tb.Plan.NodeIndex(names[i])) {
			pn := port.If
			s := sw.Stats(p)
			node, cpu := names[i], sw.CPUTime().String()
			if p > 0 {
				node, cpu = "", ""
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", node, pn, s.RxFrames, s.TxFrames, s.Drops, s.TxErrors, cpu)
		}
	}
	w.Flush()
	return runErr
}

// newTestbedCmd is "smartt-lab testbed" with one subcommand per testbed action.
func newTestbedCmd(stderr io.Writer) *cobra.Command {
	leaf := func(use, short string, args cobra.PositionalArgs, bind func(*pflag.FlagSet) cli.RunFunc) *cobra.Command {
		return cli.Leaf(use, short, "", args, bind)
	}
	return cli.Group("testbed", "build and drive a network-namespace testbed, as root", testbedUsage,
		leaf("up [--name tb] [topology flags | --spec FILE]", "build a testbed of network namespaces (removes leftovers of the same name first)", cobra.NoArgs, bindTestbedUp),
		leaf("down [--name tb]", "remove every namespace of the testbed", cobra.NoArgs, bindTestbedDown),
		leaf("status [--name tb]", "list its namespaces, addresses, interfaces and counters", cobra.NoArgs, bindTestbedStatus),
		cli.NoInterspersed(leaf("link [--name tb] <name> down|up|rate <rate>|flaky <loss%> <burst>", "fail or change a link", cobra.MinimumNArgs(2), bindTestbedLink)),
		leaf("switch [--name tb] [port-model flags]", "run the userspace switches of an emulated testbed until interrupted", cobra.NoArgs, bindTestbedSwitch),
		cli.NoInterspersed(leaf("exec [--name tb] <node> <command> [args...]", "run a command on a node", cobra.MinimumNArgs(2), bindTestbedExec)),
		leaf("run [flags] SCENARIO", "run a simulator scenario (a file or a shipped name) on an emulated testbed, a daemon per host", scenarioArg, bindTestbedRun),
		cli.Leaf("sweep [flags] SCENARIO -set FIELD=V1,V2 ... -out DIR", "run a scenario on the testbed over a grid of field values and seeds, one run at a time",
			fmt.Sprintf(sweepUsage, "testbed"), cobra.MaximumNArgs(1), func(fs *pflag.FlagSet) cli.RunFunc { return bindSweep(testbedSweep, stderr, fs) }),
		cli.NoInterspersed(leaf("fail [--name tb] down|up|restore|heal LINK | degrade RATE LINK | flaky GAP BURST LINK", "change a link of a running \"testbed run\"", cobra.MinimumNArgs(1), bindTestbedFail)),
		leaf("soak [flags] [SOAK.yaml]", "a mixed workload under flaky links, link flaps and a daemon restart", cobra.MaximumNArgs(1), bindTestbedSoak),
		leaf("mpi [flags] SCENARIO | mpi -render TSV", "MPI all-to-all and all-reduce over smartt and tcp across an emulated fabric, healthy and with a failed link", cobra.MaximumNArgs(1), bindTestbedMPI),
		leaf("osu [flags] SCENARIO | osu -render TSV", "the RL-CC paper's Fig. 9: MPI all-to-all latency per size over smartt with each controller across an emulated fabric", cobra.MaximumNArgs(1), bindTestbedOSU),
	)
}
