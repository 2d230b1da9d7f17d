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
blocks). Regions marked check are deterministic and fast: the tests compare them. Every
other region gets a stamp line, digests of its body, of its command line and the files it
reads, and of the Go code that computes it (docs/results/README.md); the tests recompute
them, so a table edited by hand, or whose inputs changed since its command last ran,
fails them until "smartt-lab results -only NAME" reruns it.
`

// bindResults declares the flags of "smartt-lab results" on fs.
func bindResults(stderr io.Writer, fs *pflag.FlagSet) cli.RunFunc {
	var o resultsOpts
	fs.BoolVar(&o.check, "check", false, "rewrite nothing: rerun the commands, list the stale tables and fail if there are any")
	fs.StringVar(&o.only, "only", "", "regenerate only these regions (comma-separated names)")
	fs.BoolVar(&o.list, "list", false, "list the regions and their commands")
	fs.BoolVar(&o.stale, "stale", false, "rerun nothing: list the regions whose stamps no longer match their body, files or code (as the tests do) and fail if there are any")
	fs.BoolVar(&o.adopt, "adopt", false, "rerun nothing: stamp the regions whose stamps no longer match, as they stand; the page then says the table was not rerun (measured regions: records the measurement)")
	fs.StringVar(&o.root, "root", "", "repository root (default: the nearest directory with a go.mod)")
	return func(_ []string, stdout io.Writer) error { return o.run(stdout, stderr) }
}

type resultsOpts struct {
	check, list, stale, adopt bool
	only, root                string
}

// regions returns the regions of the docs, only those named by -only if set.
func (o *resultsOpts) regions() ([]results.Region, error) {
	if o.root == "" {
		r, err := results.Root(".")
		if err != nil {
			return nil, err
		}
		o.root = r
	}
	regions, err := results.Scan(o.root)
	if err != nil || o.only == "" {
		return regions, err
	}
	names := strings.Split(o.only, ",")
	for _, n := range names {
		if !slices.ContainsFunc(regions, func(r results.Region) bool { return r.Name == n }) {
			return nil, fmt.Errorf("-only: no region %q (see smartt-lab results -list)", n)
		}
	}
	return slices.DeleteFunc(regions, func(r results.Region) bool { return !slices.Contains(names, r.Name) }), nil
}

func (o *resultsOpts) run(stdout, stderr io.Writer) error {
	regions, err := o.regions()
	if err != nil {
		return err
	}
	switch {
	case o.list:
		for _, r := range regions {
			rel, _ := filepath.Rel(o.root, r.File)
			attr := ""
			switch {
			case r.Check:
				attr = " [check]"
			case r.Measured:
				attr = " [measured]"
			case r.Stamp != nil && r.Stamp.Adopted:
				attr = " [adopted]"
			}
			fmt.Fprintf(stdout, "%s%s\t%s:%d\t%s\n", r.Name, attr, rel, r.Line, r.Cmd)
		}
		return nil
	case o.stale:
		return o.listStale(regions, stdout)
	}
	outputs := map[string]string{}
	var stale []string
	for _, r := range regions {
		u, err := o.update(r, outputs, stderr)
		if err != nil {
			return fmt.Errorf("%s (region %s): %w", r.Cmd, r.Name, err)
		}
		changed, err := o.apply(r, u)
		if err != nil {
			return err
		}
		if changed {
			rel, _ := filepath.Rel(o.root, r.File)
			stale = append(stale, rel+": "+r.Name)
		}
	}
	verb := "rewritten"
	if o.check {
		verb = "stale"
	}
	for _, s := range stale {
		fmt.Fprintf(stdout, "%s %s\n", verb, s)
	}
	fmt.Fprintf(stdout, "%d tables, %d %s\n", len(regions), len(stale), verb)
	if o.check && len(stale) > 0 {
		return fmt.Errorf("results: %d tables differ from what their commands print now", len(stale))
	}
	return nil
}

// listStale prints the regions whose stamps do not verify.
func (o *resultsOpts) listStale(regions []results.Region, stdout io.Writer) error {
	n := 0
	for _, r := range regions {
		if err := results.Verify(o.root, r); err != nil {
			rel, _ := filepath.Rel(o.root, r.File)
			fmt.Fprintf(stdout, "%s\t%s:%d\t%v\n", r.Name, rel, r.Line, err)
			n++
		}
	}
	fmt.Fprintf(stdout, "%d tables, %d whose stamps do not match\n", len(regions), n)
	if n > 0 {
		return fmt.Errorf("results: %d tables are stale", n)
	}
	return nil
}

// update reruns a region's command (each command once, however many tables it prints:
// outputs) or, with -adopt, takes the region as it stands.
func (o *resultsOpts) update(r results.Region, outputs map[string]string, stderr io.Writer) (results.Update, error) {
	body := r.Body
	if r.Check && o.adopt {
		return results.Update{Body: body}, nil // a test compares it; nothing to record
	}
	if o.adopt && results.Verify(o.root, r) == nil {
		return results.Update{Body: body, Stamp: r.Stamp}, nil // still fresh: keep its stamp
	}
	// The inputs as the command is about to read them (the code: as this binary was
	// built, if nobody edits between the build and the run).
	st, _, err := results.Compute(o.root, r, "")
	if err != nil {
		return results.Update{}, err
	}
	if !o.adopt {
		out, ok := outputs[r.Cmd]
		if !ok {
			fmt.Fprintf(stderr, "results: running %s\n", r.Cmd)
			scratch := ""
			if o.check { // files the commands write (a sweep's -out) go elsewhere too
				if scratch, err = os.MkdirTemp("", "smartt-results-"); err != nil {
					return results.Update{}, err
				}
				defer os.RemoveAll(scratch)
			}
			if out, err = runResultsCmd(o.root, r.Cmd, scratch, stderr); err != nil {
				return results.Update{}, err
			}
			outputs[r.Cmd] = out
		}
		if body, err = results.Extract(out, r.Name); err != nil {
			return results.Update{}, err
		}
	}
	u := results.Update{Body: body}
	if r.Check {
		return u, nil
	}
	st.Body = results.BodyDigest(body)
	st.Adopted = o.adopt && !r.Measured
	u.Stamp = &st
	return u, nil
}

// apply puts u into region r's file (not with -check: then it only compares) and says
// whether the region changed. Each region is written as soon as its command has run, so
// an interrupted regeneration keeps the tables it finished.
func (o *resultsOpts) apply(r results.Region, u results.Update) (bool, error) {
	b, err := os.ReadFile(r.File)
	if err != nil {
		return false, err
	}
	text, changed, err := results.Rewrite(r.File, string(b), map[string]results.Update{r.Name: u})
	if err != nil || len(changed) == 0 || o.check {
		return len(changed) > 0, err
	}
	return true, os.WriteFile(r.File, []byte(text), 0o644)
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
	return cli.Leaf("results [--check] [--stale] [--adopt] [--only NAME,...] [--list]", "regenerate the results tables in docs/ from their commands",
		resultsUsage, cobra.NoArgs, func(fs *pflag.FlagSet) cli.RunFunc { return bindResults(stderr, fs) })
}
