// Command smartt is the operator's command-line tool on a host: it talks to a running
// smarttd (status, conns, send, recv, bench, version, check), checks config files (check
// --config, smarttd -check-config's code) and runs the demo (two daemons
// in-process, or the protocol engines over the in-memory test network with -inmem). It
// links no simulator, testbed, training or plotting: those are smartt-lab's. Run
// "smartt -h" for its commands.
package main

import (
	"os"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
)

func main() {
	cli.Main(newRootCmd(os.Stdin, os.Stdout, os.Stderr))
}
