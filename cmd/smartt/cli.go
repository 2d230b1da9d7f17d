package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/smartt-transport/smartt/version"
)

// parseArgs parses args with fs, allowing flags after positional arguments ("send FILE
// -to HOST:PORT"); "--" ends the flags. fs.Args() are the positional arguments after it.
func parseArgs(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

// resolveAddrPort parses HOST:PORT, resolving a host name (the first address it has,
// IPv4 preferred) when HOST is not an IP address.
func resolveAddrPort(ctx context.Context, s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	host, ps, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("want HOST:PORT of the peer daemon (e.g. 10.0.0.2:23600 or node2:23600): %v", err)
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || port == 0 {
		return netip.AddrPort{}, fmt.Errorf("port %q: want 1..65535 (smarttd's default is 23600)", ps)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return netip.AddrPort{}, fmt.Errorf("resolving %q: %v; give the peer's IP address instead", host, err)
	}
	pick := ips[0]
	for _, ip := range ips {
		if ip.Unmap().Is4() {
			pick = ip
			break
		}
	}
	return netip.AddrPortFrom(pick.Unmap(), uint16(port)), nil
}

// daemonHint adds what to do to an error of a command that could not reach smarttd.
func daemonHint(err error) error {
	if err == nil || !strings.Contains(err.Error(), "smarttd at ") {
		return err
	}
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%w\nno smarttd answers on that socket: start one (smarttd -config smarttd.yaml, "+
			"or systemctl start smarttd; docs/deploy.md) or point at its socket with -socket PATH or $SMARTT_SOCKET", err)
	}
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
		return fmt.Errorf("%w\nthe socket is not yours: join the group of api.group (docs/deploy.md) or run as root", err)
	}
	return err
}

// leaf makes a command whose flags its run function parses with the standard flag
// package (single or double dash, before or after the positional arguments); -h prints
// the command's help and then its flags.
func leaf(use, short, long string, run func(args []string, out io.Writer) error) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Long: long, DisableFlagParsing: true, DisableFlagsInUseLine: true,
		RunE: func(c *cobra.Command, args []string) error {
			for _, a := range args {
				if a == "--" || (c.Name() == "exec" && !strings.HasPrefix(a, "-")) {
					break // testbed exec: from the node on, the arguments are the command's
				}
				if a == "-h" || a == "--help" || a == "-help" {
					fmt.Fprintf(c.OutOrStdout(), "%s\n\nUsage:\n  %s\n\nFlags:\n", strings.TrimSpace(c.Long+"\n"+c.Short), c.UseLine())
					fmt.Fprint(c.OutOrStdout(), flagHelp(run, args...)) // with the other args: "demo -inmem -h"
					return nil
				}
			}
			err := run(args, c.OutOrStdout())
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			if err != nil && isFlagError(err) {
				return usageError{err}
			}
			return daemonHint(err)
		}}
	c.ValidArgsFunction = func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if strings.HasPrefix(toComplete, "-") {
			var out []string
			for _, f := range flagNames(run) {
				if strings.HasPrefix(f, toComplete) {
					out = append(out, f)
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveDefault // files
	}
	leafRuns[c] = run
	return c
}

// flagNames returns a leaf command's flags ("-to", "-socket", ...) for shell completion.
func flagNames(run func(args []string, out io.Writer) error) []string {
	var names []string
	for _, line := range strings.Split(flagHelp(run), "\n") {
		if rest, ok := strings.CutPrefix(line, "  -"); ok {
			names = append(names, "-"+strings.Fields(rest)[0])
		}
	}
	return names
}

// leafRuns are the run functions of the leaf commands, for their flags' help in man pages.
var leafRuns = map[*cobra.Command]func(args []string, out io.Writer) error{}

// flagHelp returns the flag package's description of a leaf command's flags, as run
// prints it for args (which hold -h; none: just -h).
func flagHelp(run func(args []string, out io.Writer) error, args ...string) string {
	if len(args) == 0 {
		args = []string{"-h"}
	}
	var b bytes.Buffer
	_ = run(args, &b)
	help := b.String()
	if strings.HasPrefix(help, "Usage of ") { // the flag package's own title
		_, help, _ = strings.Cut(help, "\n")
	}
	return help
}

// isFlagError tells a flag package parse error.
func isFlagError(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "flag provided but not defined") || strings.HasPrefix(s, "invalid value ") ||
		strings.HasPrefix(s, "flag needs an argument") || strings.HasPrefix(s, "invalid boolean")
}

// newRootCmd builds smartt's command tree.
func newRootCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "smartt",
		Short: "the smartt command-line tool: talk to smarttd, run the demo, simulator and testbed",
		Long: "smartt talks to a running smarttd (status, conns, send, recv, bench) and runs the demo,\n" +
			"the hardware-profile report, the fabric simulator and the network-namespace testbed.\n" +
			"Commands that talk to a daemon take -socket (default $SMARTT_SOCKET or /run/smartt/smarttd.sock).\n" +
			"Flags take one or two dashes and may follow the positional arguments.",
		SilenceUsage: true, SilenceErrors: true,
		Version: versionString(),
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(newDemoCmd())
	root.AddCommand(newClientCmds(stdin)...)
	root.AddCommand(newBenchCmd(), newHWProfileCmd(), newSimCmd(stderr), newTestbedCmd(), newVersionCmd(), newManCmd())
	root.AddCommand(newRLCCCmd(stderr))
	return root
}

// newManCmd generates man pages of every command.
func newManCmd() *cobra.Command {
	return &cobra.Command{Use: "man DIR", Short: "write man pages of smartt and every command into DIR (section 1)",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			root := c.Root()
			root.DisableAutoGenTag = true
			for leaf, run := range leafRuns {
				if leaf.Root() == root {
					leaf.Long = strings.TrimSpace(leaf.Long+"\n\n"+leaf.Short) + "\n\nFlags (one or two dashes):\n\n" + flagHelp(run)
				}
			}
			if err := doc.GenManTree(root, &doc.GenManHeader{Title: "SMARTT", Section: "1", Source: "smartt " + versionString()}, args[0]); err != nil {
				return fmt.Errorf("writing man pages: %w (is %s a writable directory?)", err, args[0])
			}
			fmt.Fprintf(c.OutOrStdout(), "man pages in %s; e.g. man -l %s/smartt.1\n", args[0], args[0])
			return nil
		}}
}

// versionString is smartt's version line.
func versionString() string { return version.Long("smartt") }

// sub makes a subcommand of a group (hwprofile, sim, testbed) that runs the group's run
// function with its name first.
func sub(name, use, short string, run func(args []string, out io.Writer) error) *cobra.Command {
	return leaf(use, short, "", func(args []string, out io.Writer) error {
		return run(append([]string{name}, args...), out)
	})
}

// group makes a command that only holds subcommands: without one it prints its help.
func group(use, short, long string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Long: long, Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 || (len(args) == 1 && args[0] == "help") {
				return c.Help()
			}
			return usageError{fmt.Errorf("unknown command %q for %q: run \"%s -h\" for its commands", args[0], c.CommandPath(), c.CommandPath())}
		}}
	c.AddCommand(subs...)
	return c
}

// normalizeArgs keeps the single-dash spellings smartt always took where cobra wants two
// dashes: "smartt -version" and "-help" anywhere (the flag package takes "--help" too).
func normalizeArgs(args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if a == "--" {
			break
		}
		if a == "-help" {
			out[i] = "--help"
		}
	}
	if len(out) > 0 && out[0] == "-version" {
		out[0] = "version"
	}
	return out
}
