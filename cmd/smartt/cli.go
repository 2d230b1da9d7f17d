package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/version"
)

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
			"or systemctl start smarttd; docs/deploy.md) or point at its socket with --socket PATH or $SMARTT_SOCKET", err)
	}
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
		return fmt.Errorf("%w\nthe socket is not yours: join the group of api.group (docs/deploy.md) or run as root", err)
	}
	return err
}

// leaf is cli.Leaf with daemonHint on the command's error.
func leaf(use, short, long string, args cobra.PositionalArgs, bind func(fs *pflag.FlagSet) cli.RunFunc) *cobra.Command {
	return cli.Leaf(use, short, long, args, func(fs *pflag.FlagSet) cli.RunFunc {
		run := bind(fs)
		return func(args []string, out io.Writer) error { return daemonHint(run(args, out)) }
	})
}

// newRootCmd builds smartt's command tree.
func newRootCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "smartt",
		Short: "the smartt operator tool: talk to smarttd, send and receive messages, benchmark, run the demo",
		Long: "smartt talks to a running smarttd (status, conns, send, recv, bench, version, check), checks config\n" +
			"files (check --config) and runs the demo.\n" +
			"Commands that talk to a daemon take --socket (default $SMARTT_SOCKET or /run/smartt/smarttd.sock).\n" +
			"Flags may follow the positional arguments; a long flag may be given with one dash (-timeout 5s).\n" +
			"The simulator, testbed, results and RL-CC tools are in smartt-lab (go run ./cmd/smartt-lab -h).",
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cli.SetVersion(root, versionString())
	root.AddCommand(newDemoCmd())
	root.AddCommand(newClientCmds(stdin)...)
	root.AddCommand(newBenchCmd(), newVersionCmd(), newCheckCmd(), cli.ManCmd("smartt "+versionString()), cli.GenDocsCmd("smartt "+versionString()))
	cli.Prepare(root)
	return root
}

// versionString is smartt's version line.
func versionString() string { return version.Long("smartt") }
