// Command smartt is the smartt command-line tool. For now it has one subcommand, demo:
// two protocol engines exchanging messages over the in-memory test network.
package main

import (
	"fmt"
	"os"
)

const usage = `usage: smartt <command> [flags]

commands:
  demo    two endpoints exchange messages over a lossy, reordering in-memory network
          (run "smartt demo -h" for its flags)
  sim     run a fabric simulation: smartt sim run SCENARIO.yaml (see docs/sim.md)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "demo":
		err = runDemo(os.Args[2:], os.Stdout)
	case "sim":
		err = runSim(os.Args[2:], os.Stdout, os.Stderr)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "smartt: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "smartt:", err)
		os.Exit(1)
	}
}
