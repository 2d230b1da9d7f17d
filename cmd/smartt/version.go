package main

import (
	"context"
	"fmt"
	"github.com/spf13/cobra"
	"io"
	"time"

	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/version"
)

// runVersion prints this tool's version and, if a daemon answers on -socket within a
// short timeout, the daemon's (a daemon that does not answer is not an error).
func runVersion(args []string, out io.Writer) error {
	var cf clientFlags
	fs := newFlagSet("version", out, &cf)
	cf.timeout = time.Second
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
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
	return leaf("version [flags]", "this tool's version, VCS revision and Go version (and the daemon's, if one answers)", "", runVersion)
}
