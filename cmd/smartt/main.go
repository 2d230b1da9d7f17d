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
  hwprofile report
          every CC and LB against every hardware profile (state, ops, decision time)
  testbed build and drive a network-namespace testbed, as root (run "smartt testbed help")
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
	case "hwprofile":
		err = runHWProfile(os.Args[2:], os.Stdout)
	case "testbed":
		err = runTestbed(os.Args[2:], os.Stdout)
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
