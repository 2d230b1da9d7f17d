package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
)

// execute runs smartt-lab with args and returns its output (stdout and stderr) and error.
func execute(args ...string) (string, error) {
	var out bytes.Buffer
	err := labRun(&out, &out, args...)
	return out.String(), err
}

// "smartt-lab help CMD" and "smartt-lab CMD -h" print the same text, listing every flag
// and the usage once, for every command; a group lists its subcommands.
func TestHelpSameBothWays(t *testing.T) {
	problems, n := cli.HelpMismatches(func(out *bytes.Buffer) *cobra.Command { return newRootCmd(nil, out, out) })
	for _, p := range problems {
		t.Error(p)
	}
	if n < 20 {
		t.Fatalf("walked %d commands", n)
	}
	out, _ := execute("testbed", "-h")
	tb, _, _ := newRootCmd(nil, new(bytes.Buffer), new(bytes.Buffer)).Find([]string{"testbed"})
	for _, sub := range tb.Commands() {
		if n := strings.Count(out, "\n  "+sub.Name()+" "); !sub.Hidden && sub.Name() != "help" && n != 1 {
			t.Errorf("testbed -h lists %s %d times:\n%s", sub.Name(), n, out)
		}
	}
	for _, args := range [][]string{{"sim", "run", "-h"}, {"results", "-h"}, {"sim", "sweep", "-help"}} {
		if out, err := execute(args...); err != nil || strings.Count(out, "Usage:") != 1 || !strings.Contains(out, "--") {
			t.Errorf("%v printed its usage %d times: %v\n%s", args, strings.Count(out, "Usage:"), err, out)
		}
	}
}

// testbed exec passes -h after the node to the command instead of printing help (it
// fails here: no testbed of that name).
func TestTestbedExecKeepsCommandFlags(t *testing.T) {
	out, err := execute("testbed", "exec", "-name", "i14-none", "h0", "ls", "-h")
	if err == nil || strings.Contains(out, "Usage:") {
		t.Fatalf("testbed exec ... ls -h printed help or succeeded: %v\n%s", err, out)
	}
	if err == nil || cli.IsUsageError(err) {
		t.Fatalf("testbed exec: %v (want the testbed's error, not a usage error)", err)
	}
}

// Usage errors (unknown commands and flags, wrong arguments) are UsageError: exit 2.
func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"testbed", "nosuch"}, {"nosuch"}, {"sim", "run"}, {"sim", "run", "a", "b"},
		{"sim", "run", "-bogus", "x"}, {"results", "stray"}, {"rlcc", "train", "-iterations", "x"}, {"testbed", "exec", "h0"}} {
		if _, err := execute(args...); err == nil || !cli.IsUsageError(err) {
			t.Errorf("%v: %v", args, err)
		}
	}
	var stderr bytes.Buffer
	if code := cli.Run(newRootCmd(nil, &bytes.Buffer{}, &stderr), []string{"sim", "run", "-nosuch"}, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "unknown flag: --nosuch") || !strings.Contains(stderr.String(), "smartt-lab sim run --help") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

// sim run and testbed run find a shipped scenario by name, as sim sweep does.
func TestScenarioByName(t *testing.T) {
	sc, err := loadScenario("incast_128")
	if err != nil || sc.Topology.Hosts == 0 {
		t.Fatalf("incast_128: %+v, %v", sc, err)
	}
	if _, err := loadScenario("incast_128.yaml"); err != nil {
		t.Fatalf("incast_128.yaml: %v", err)
	}
	_, err = execute("sim", "run", "-progress=false", "no_such_scenario")
	if err == nil || !strings.Contains(err.Error(), "no shipped scenario") || !strings.Contains(err.Error(), "incast_128") {
		t.Fatalf("unknown name: %v", err)
	}
	if _, err := loadScenario("./incast_128"); err == nil {
		t.Fatal("a path is not looked up as a shipped name")
	}
}

// sim run --size and testbed run --size read sizes as the config files do.
func TestSimSizeFlag(t *testing.T) {
	for in, want := range map[string]int64{"64M": 64 << 20, "4k": 4096, "2MiB": 2 << 20, "1MB": 1e6, "1500": 1500} {
		sc, err := loadScenario("incast_128")
		if err != nil {
			t.Fatal(err)
		}
		if err := applySimFlags(sc, 0, "", "", 0, 0, in); err != nil || int64(sc.Workload.Size) != want {
			t.Errorf("--size %s: %d, %v", in, sc.Workload.Size, err)
		}
	}
	sc, _ := loadScenario("incast_128")
	if err := applySimFlags(sc, 0, "", "", 0, 0, "2Mx"); err == nil || !cli.IsUsageError(err) {
		t.Errorf("--size 2Mx: %v", err)
	}
}

// gen-docs writes man pages listing the flags and the completion scripts.
func TestGenDocs(t *testing.T) {
	dir := t.TempDir()
	if _, err := execute("gen-docs", dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "smartt-lab-sim-run.1"))
	if err != nil || !bytes.Contains(b, []byte(`\fB\-\-compare\fP`)) || !bytes.Contains(b, []byte(`\fB\-\-seed\fP`)) {
		t.Fatalf("sim run man page: %v\n%s", err, b)
	}
	for _, f := range []string{"smartt-lab-testbed-exec.1", "completion/smartt-lab.bash", "completion/_smartt-lab", "completion/smartt-lab.fish"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() < 100 {
			t.Errorf("%s: %v", f, err)
		}
	}
}
