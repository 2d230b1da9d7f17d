package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/version"
)

// runVersion prints this tool's version and, if a daemon answers on -socket within a
// short timeout, the daemon's (a daemon that does not answer is not an error).
func runVersion(cf clientFlags, out io.Writer) error {
	fmt.Fprintln(out, version.Long("smartt"))
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	v, err := client.New(cf.socket).Version(ctx)
	if err != nil {
		fmt.Fprintf(out, "smarttd: no daemon answered on %s\n", cf.socket)
		return nil
	}
	fmt.Fprintf(out, "smarttd %s (%s, API %s, wire v%d) on %s\n", v.Version, v.Go, v.Protocol, v.Wire, cf.socket)
	return nil
}

// newVersionCmd is "smartt version".
func newVersionCmd() *cobra.Command {
	return leaf("version", "this tool's version, VCS revision and Go version (and the daemon's, if one answers)", "", cobra.NoArgs,
		func(fs *pflag.FlagSet) cli.RunFunc {
			var cf clientFlags
			cf.declare(fs, time.Second, "wait this long for the daemon's answer")
			return func(_ []string, out io.Writer) error { return runVersion(cf, out) }
		})
}
