// Command smartt is the smartt command-line tool: it talks to a running smarttd (status,
// conns, send, recv, bench) and runs the demo (two daemons in-process, or the protocol
// engines over the in-memory test network with -inmem).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

const usage = `usage: smartt <command> [flags]

commands:
  demo    start two daemons on 127.0.0.1 and 127.0.0.2, move messages, print what happened
          (demo -inmem: two engines over the lossy, reordering in-memory test network)
  status  the daemon's status, version and capabilities
  conns   the daemon's live connections with their congestion-control state
  send    send a file (or stdin) as one message: send -to ADDR:PORT [-endpoint N] FILE|-
  recv    receive messages: recv [-endpoint N] -out DIR|-
  bench   throughput and latency over a message-size sweep (two in-process daemons, or -to a peer)
  hwprofile report
          every CC and LB against every hardware profile (state, ops, decision time)
  testbed build and drive a network-namespace testbed, as root (run "smartt testbed help")
  sim     run a fabric simulation: smartt sim run SCENARIO.yaml (see docs/sim.md)
  version this tool's version, VCS revision and Go version (and the daemon's, if one answers)

Run "smartt <command> -h" for a command's flags. Commands that talk to a daemon use
-socket (default $SMARTT_SOCKET or /run/smartt/smarttd.sock).
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	args := os.Args[2:]
	switch os.Args[1] {
	case "demo":
		err = runDemoCmd(args, os.Stdout)
	case "status":
		err = runStatus(args, os.Stdout)
	case "conns":
		err = runConns(args, os.Stdout)
	case "send":
		err = runSend(args, os.Stdin, os.Stdout)
	case "recv":
		err = runRecv(args, os.Stdout)
	case "bench":
		err = runBench(args, os.Stdout)
	case "hwprofile":
		err = runHWProfile(args, os.Stdout)
	case "testbed":
		err = runTestbed(args, os.Stdout)
	case "sim":
		err = runSim(args, os.Stdout, os.Stderr)
	case "version", "-version", "--version":
		err = runVersion(args, os.Stdout)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "smartt: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return // the flag set printed its usage
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "smartt:", err)
		os.Exit(1)
	}
}
