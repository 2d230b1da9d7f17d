package main

import (
	"io"
	"strings"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
)

// labRun runs smartt-lab with args as main does: stdout to out, stderr to errb.
func labRun(out, errb io.Writer, args ...string) error {
	root := newRootCmd(strings.NewReader(""), out, errb)
	root.SetArgs(cli.NormalizeArgs(root, args))
	return root.Execute()
}

// The tests' entry points: each runs one command line through the whole command tree.

func runAILB(args []string, out, errb io.Writer) error {
	return labRun(out, errb, append([]string{"sim", "ailb"}, args...)...)
}

func runHWProfile(args []string, out io.Writer) error {
	return labRun(out, out, append([]string{"hwprofile"}, args...)...)
}

func runResults(args []string, out, errb io.Writer) error {
	return labRun(out, errb, append([]string{"results"}, args...)...)
}

func runRLCC(args []string, out, progress io.Writer) error {
	return labRun(out, progress, append([]string{"rlcc"}, args...)...)
}

func runSim(args []string, out, errb io.Writer) error {
	return labRun(out, errb, append([]string{"sim"}, args...)...)
}

func runSweep(mode sweepMode, args []string, out, errb io.Writer) error {
	return labRun(out, errb, append([]string{mode.group, "sweep"}, args...)...)
}

func runTestbed(args []string, out io.Writer) error {
	return labRun(out, out, append([]string{"testbed"}, args...)...)
}
