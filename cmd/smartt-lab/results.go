package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/test/results"
)

const resultsUsage = `Regenerates every results table in docs/: each sits between
"<!-- results:NAME [check] cmd: COMMAND -->" and "<!-- /results -->" and is what COMMAND
prints (smartt-lab commands run in-process, others with sh -c in the repository root; a
command may print several tables as "<!-- results:NAME -->" ... "<!-- /results -->"
blocks). Regions marked check are deterministic and fast: the tests compare them.
`

// bindResults declares the flags of "smartt-lab results" on fs.
func bindResults(stderr io.Writer, fs *pflag.FlagSet) cli.RunFunc {
	check := fs.Bool("check", false, "rewrite nothing: list the stale tables and fail if there are any")
	only := fs.String("only", "", "regenerate only these regions (comma-separated names)")
	list := fs.Bool("list", false, "list the regions and their commands")
	root := fs.String("root", "", "repository root (default: the nearest directory with a go.mod)")
	return func(_ []string, stdout io.Writer) error {
		if *root == "" {
			r, err := results.Root(".")
			if err != nil {
				return err
			}
			*root = r
		}
		regions, err := results.Scan(*root)
		if err != nil {
			return err
		}
		if *only != "" {
			names := strings.Split(*only, ",")
			for _, n := range names {
				if !slices.ContainsFunc(regions, func(r results.Region) bool { return r.Name == n }) {
					return fmt.Errorf("-only: no region %q (see smartt-lab results -list)", n)
				}
			}
			regions = slices.DeleteFunc(regions, func(r results.Region) bool { return !slices.Contains(names, r.Name) })
		}
		if *list {
			for _, r := range regions {
				rel, _ := filepath.Rel(*root, r.File)
				attr := ""
				if r.Check {
					attr = " [check]"
				}
				fmt.Fprintf(stdout, "%s%s\t%s:%d\t%s\n", r.Name, attr, rel, r.Line, r.Cmd)
			}
			return nil
		}
		// Each command runs once, however many tables it prints.
		outputs := map[string]string{}
		bodies := map[string]map[string]string{} // file -> name -> body
		for _, r := range regions {
			out, ok := outputs[r.Cmd]
			if !ok {
				fmt.Fprintf(stderr, "results: running %s\n", r.Cmd)
				scratch := ""
				if *check { // files the commands write (a sweep's -out) go elsewhere too
					if scratch, err = os.MkdirTemp("", "smartt-results-"); err != nil {
						return err
					}
					defer os.RemoveAll(scratch)
				}
				out, err = runResultsCmd(*root, r.Cmd, scratch, stderr)
				if err != nil {
					return fmt.Errorf("%s (region %s): %w", r.Cmd, r.Name, err)
				}
				outputs[r.Cmd] = out
			}
			body, err := results.Extract(out, r.Name)
			if err != nil {
				return fmt.Errorf("%s (region %s): %w", r.Cmd, r.Name, err)
			}
			if bodies[r.File] == nil {
				bodies[r.File] = map[string]string{}
			}
			bodies[r.File][r.Name] = body
		}
		var stale []string
		files := make([]string, 0, len(bodies))
		for f := range bodies {
			files = append(files, f)
		}
		slices.Sort(files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			text, changed, err := results.Rewrite(f, string(b), bodies[f])
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(*root, f)
			for _, n := range changed {
				stale = append(stale, rel+": "+n)
			}
			if len(changed) > 0 && !*check {
				if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
					return err
				}
			}
		}
		verb := "rewritten"
		if *check {
			verb = "stale"
		}
		for _, s := range stale {
			fmt.Fprintf(stdout, "%s %s\n", verb, s)
		}
		fmt.Fprintf(stdout, "%d tables, %d %s\n", len(regions), len(stale), verb)
		if *check && len(stale) > 0 {
			return fmt.Errorf("results: %d tables differ from what their commands print now", len(stale))
		}
		return nil
	}
}

// runResultsCmd runs a region's command in root and returns its standard output:
// "smartt-lab ..." in-process (also spelt "smartt ..." as before the lab tools had their
// own binary), anything else with sh -c. With scratch set, a lab command's -out
// directory is replaced by it, so checking writes nothing into the tree.
func runResultsCmd(root, cmd, scratch string, stderr io.Writer) (string, error) {
	var out bytes.Buffer
	if args, ok := labCommand(cmd); ok {
		if args == nil {
			return "", fmt.Errorf("cannot split %q into words", cmd)
		}
		if scratch != "" {
			scratchOut(args, scratch)
		}
		return runSmarttIn(root, args, stderr)
	}
	c := exec.Command("sh", "-c", cmd)
	c.Dir, c.Stdout, c.Stderr = root, &out, stderr
	c.Env = append(os.Environ(), results.Env+"=1")
	if err := c.Run(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, tail(out.String(), 40))
	}
	return out.String(), nil
}

// labCommand returns the arguments of a smartt-lab command line (nil: it does not
// split into words), and false for any other command.
func labCommand(cmd string) ([]string, bool) {
	rest, ok := strings.CutPrefix(cmd, "smartt-lab ")
	if !ok {
		if rest, ok = strings.CutPrefix(cmd, "smartt "); !ok {
			return nil, false
		}
	}
	args, err := results.Fields(rest)
	if err != nil {
		return nil, true
	}
	if len(args) == 0 || subcommandOf(newRootCmd(nil, nil, nil), args[0]) == nil {
		return nil, false // an operator command: sh -c finds smartt
	}
	return args, true
}

// subcommandOf returns c's subcommand called name, or nil.
func subcommandOf(c *cobra.Command, name string) *cobra.Command {
	for _, s := range c.Commands() {
		if s.Name() == name {
			return s
		}
	}
	return nil
}

// scratchOut points every -out in args at dir.
func scratchOut(args []string, dir string) {
	for i := range args[:max(0, len(args)-1)] {
		if args[i] == "-out" || args[i] == "--out" {
			args[i+1] = dir
		}
	}
}

// runSmarttIn runs smartt with args in-process, in directory root, and returns its stdout.
func runSmarttIn(root string, args []string, stderr io.Writer) (string, error) {
	var out bytes.Buffer
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	if err := os.Chdir(root); err != nil {
		return "", err
	}
	defer os.Chdir(wd)
	c := newRootCmd(os.Stdin, &out, stderr)
	c.SetArgs(cli.NormalizeArgs(c, args))
	err = c.Execute()
	return out.String(), err
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// newResultsCmd is "smartt-lab results".
func newResultsCmd(stderr io.Writer) *cobra.Command {
	return cli.Leaf("results [--check] [--only NAME,...] [--list]", "regenerate the results tables in docs/ from their commands",
		resultsUsage, cobra.NoArgs, func(fs *pflag.FlagSet) cli.RunFunc { return bindResults(stderr, fs) })
}
