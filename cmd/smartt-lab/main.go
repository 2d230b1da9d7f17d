// Command smartt-lab holds smartt's research tools: the fabric simulator (sim run, sweep,
// ailb), the network-namespace testbed, the results tables of docs/, RL-CC training and
// the hardware-profile report. They link the simulator, plotting and training, which the
// operator's smartt does not. Run "smartt-lab -h" for its commands.
package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/version"
)

func main() {
	cli.Main(newRootCmd(os.Stdin, os.Stdout, os.Stderr))
}

// newRootCmd builds smartt-lab's command tree.
func newRootCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "smartt-lab",
		Short: "smartt's research tools: simulator, testbed, results tables, RL-CC training, hardware profiles",
		Long: "smartt-lab runs the fabric simulator (sim), the network-namespace testbed (testbed, as root),\n" +
			"regenerates the results tables in docs/ (results), trains and evaluates RL-CC (rlcc) and\n" +
			"reports the congestion controllers against the NIC hardware profiles (hwprofile).\n" +
			"A SCENARIO is a file or a shipped scenario's name (incast_128, permutation_128, ...).\n" +
			"Flags may follow the positional arguments; a long flag may be given with one dash (-seeds 3).\n" +
			"The operator's commands (status, send, recv, bench, demo) are in smartt.",
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cli.SetVersion(root, versionString())
	root.AddCommand(newSimCmd(stderr), newTestbedCmd(stderr), newResultsCmd(stderr), newRLCCCmd(stderr), newHWProfileCmd(),
		cli.ManCmd("smartt-lab "+versionString()), cli.GenDocsCmd("smartt-lab "+versionString()))
	cli.Prepare(root)
	return root
}

// versionString is smartt-lab's version line.
func versionString() string { return version.Long("smartt-lab") }
