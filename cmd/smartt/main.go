// Command smartt is the smartt command-line tool: it talks to a running smarttd (status,
// conns, send, recv, bench) and runs the demo (two daemons in-process, or the protocol
// engines over the in-memory test network with -inmem), the hardware-profile report, the
// fabric simulator and the network-namespace testbed. Run "smartt -h" for its commands.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

func main() {
	root := newRootCmd(os.Stdin, os.Stdout, os.Stderr)
	root.SetArgs(normalizeArgs(os.Args[1:]))
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "smartt:", err)
		if isUsageError(err) {
			os.Exit(2)
		}
		if errors.As(err, new(pendingError)) {
			os.Exit(exitPending)
		}
		os.Exit(1)
	}
}

// isUsageError tells an unknown command or flag (exit status 2) from a failure (1).
func isUsageError(err error) bool {
	var u usageError
	return errors.As(err, &u) || strings.HasPrefix(err.Error(), "unknown command")
}

// usageError is a command line smartt cannot parse.
type usageError struct{ error }

// Unwrap returns the parse error.
func (u usageError) Unwrap() error { return u.error }
