package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/test/bedrun"
	"github.com/smartt-transport/smartt/test/netbed"
	"github.com/smartt-transport/smartt/test/sim"
	"github.com/smartt-transport/smartt/test/sweep"
)

const sweepUsage = `smartt-lab %[1]s sweep [flags] SCENARIO -set FIELD=V1,V2,... [-set ...] -out DIR
smartt-lab %[1]s sweep [same] -print-jobs | -emit FILE    (one command per run, for job arrays)
smartt-lab %[1]s sweep [same] -job K                      (run job K only: DIR/runs/job-00000K.json)
smartt-lab %[1]s sweep -merge DIR                         (merge DIR/runs into the table)

Runs SCENARIO (a file, or a shipped scenario's name such as permutation_128) at every
point of the grid of -set axes (any scenario field by its YAML path: transport.cc,
topology.oversubscription, workload.size, failures[0].rate, seed), -seeds times per
point (seeds s, s+1, ... from the point's seed), and writes DIR/sweep.csv and
DIR/sweep.json (one row per point: mean, min, max and std over seeds of every summary
metric) and a plot of -metric against the first axis (docs/sim.md, "Research workflow").
`

// sweepMode is what a sweep runs on: the simulator or the testbed.
type sweepMode struct {
	group    string                                               // "sim" or "testbed"
	parallel bool                                                 // runs may share the cores
	runner   func(fs *pflag.FlagSet) func() (sweep.Runner, error) // registers its flags
}

var simSweep = sweepMode{group: "sim", parallel: true,
	runner: func(*pflag.FlagSet) func() (sweep.Runner, error) {
		return func() (sweep.Runner, error) { return sweep.SimRunner, nil }
	}}

// testbedSweep runs each point on a fresh emulated testbed, one at a time: runs in real
// time would disturb each other's timing if they shared the cores.
var testbedSweep = sweepMode{group: "testbed",
	runner: func(fs *pflag.FlagSet) func() (sweep.Runner, error) {
		name := fs.String("name", "sweep", "testbed name: namespaces are smartt-<name>-<node> (removed after each run)")
		timeout := fs.Duration("timeout", 60*time.Second, "wall-time bound of each run's workload")
		return func() (sweep.Runner, error) {
			if err := os.MkdirAll(netbed.StateDir, 0o755); err != nil {
				return nil, err
			}
			return func(sc *sim.Scenario) (*sim.Result, error) {
				rep, err := bedrun.Execute(sc, bedrun.Options{Name: *name, Timeout: *timeout, Control: bedrun.ControlPath(netbed.StateDir, *name)})
				if err != nil {
					return nil, err
				}
				return rep.Result, nil
			}, nil
		}
	}}

// setFlags collects repeated -set flags.
type setFlags []sweep.Axis

// String lists the axes.
func (s *setFlags) String() string {
	var parts []string
	for _, a := range *s {
		parts = append(parts, a.String())
	}
	return strings.Join(parts, " ")
}

// Type names the flag's value in help.
func (s *setFlags) Type() string { return "FIELD=V1,V2" }

// Set adds an axis.
func (s *setFlags) Set(v string) error {
	a, err := sweep.ParseAxis(v)
	if err != nil {
		return err
	}
	*s = append(*s, a)
	return nil
}

// bindSweep declares the flags of "smartt-lab sim sweep" or "testbed sweep" on fs.
func bindSweep(mode sweepMode, stderr io.Writer, fs *pflag.FlagSet) cli.RunFunc {
	var axes setFlags
	fs.Var(&axes, "set", "an axis: FIELD=V1,V2,... (repeat for more axes; the first is the plot's x axis)")
	seeds := fs.Int("seeds", 1, "runs per point, with seeds s, s+1, ... (s: the point's seed)")
	jobs := 1
	if mode.parallel {
		fs.IntVarP(&jobs, "jobs", "j", runtime.GOMAXPROCS(0), "runs at once")
	}
	out := fs.String("out", "", "directory for sweep.csv, sweep.json, the plot and runs/ (one file per run)")
	metric := fs.String("metric", "completion_rel", "metric plotted against the first axis")
	show := fs.String("show", "completion_rel,fct.p99_ns,drops,trims,retx", "metrics of the markdown table printed on stdout")
	pivot := fs.String("pivot", "", "print completion_rel (or each metric of an explicit -show) with this axis's values as columns (comparison tables)")
	plots := fs.String("plots", "png", "plot formats: png, svg, both or none")
	cdf := fs.String("cdf", "", "also draw FCT CDFs with one line per value of this axis (one plot per combination of the others)")
	printJobs := fs.Bool("print-jobs", false, "print one command per run (point x seed) and exit")
	emit := fs.String("emit", "", "write one command per run to this file and exit")
	job := fs.Int("job", -1, "run only this job (0..runs-1) and write its file under -out/runs")
	merge := fs.String("merge", "", "merge the run files in DIR/runs into DIR's table and plot (no runs)")
	resume := fs.Bool("resume", false, "skip runs whose file exists under -out/runs")
	reuse := fs.String("reuse", "", "take the runs of this point and seed from another sweep's DIR/runs (same scenario file; comma-separated DIRs) instead of running them")
	keepRuns := fs.Bool("keep-runs", true, "keep -out/runs after a local sweep merged them")
	progress := fs.Bool("progress", true, "report each finished run on stderr")
	makeRunner := mode.runner(fs)
	return func(args []string, stdout io.Writer) error {
		switch *plots {
		case "png", "svg", "both", "none":
		default:
			return fmt.Errorf("-plots = %q: must be png, svg, both or none", *plots)
		}
		showList := strings.Split(*show, ",")
		showSet := false
		fs.Visit(func(f *pflag.Flag) { showSet = showSet || f.Name == "show" })
		md := func(t *sweep.Table, w io.Writer) error {
			if *pivot == "" {
				return t.WriteMarkdown(w, showList)
			}
			if !showSet {
				return t.WriteMarkdownPivot(w, showList[0], *pivot)
			}
			for i, m := range showList {
				if i > 0 {
					fmt.Fprintln(w)
				}
				if err := t.WriteMarkdownPivot(w, m, *pivot); err != nil {
					return err
				}
			}
			return nil
		}
		if *merge != "" {
			if len(args) != 0 || len(axes) > 0 {
				return errors.New("sweep -merge DIR: the sweep is read from the run files; give no scenario or -set")
			}
			dir := *merge
			if *out == "" {
				*out = dir
			}
			runs, err := sweep.ReadRuns(dir)
			if err != nil {
				return err
			}
			t, err := sweep.Merge(runs)
			if err != nil {
				return err
			}
			return writeSweep(t, *out, *metric, *plots, *cdf, md, stdout, stderr)
		}
		if len(args) != 1 {
			return cli.Usagef("%s sweep: want exactly one scenario (a file or a shipped name)", mode.group)
		}
		ref := args[0]
		src, err := sweep.LoadScenario(ref)
		if err != nil {
			return err
		}
		spec, err := sweep.New(ref, src, axes, *seeds)
		if err != nil {
			return err
		}
		if *cdf != "" && !slices.ContainsFunc(spec.Axes, func(a sweep.Axis) bool { return a.Field == *cdf }) {
			return fmt.Errorf("-cdf %s: not an axis of the sweep", *cdf)
		}
		if *out == "" {
			return fmt.Errorf("%s sweep: -out DIR is required (the table, plot and run files go there)", mode.group)
		}
		if *printJobs || *emit != "" {
			return emitJobs(mode, spec, fs, *out, *printJobs, *emit, stdout, stderr)
		}
		if *job > spec.Jobs()-1 || (*job < 0 && *job != -1) {
			return fmt.Errorf("-job %d: the sweep has jobs 0..%d", *job, spec.Jobs()-1)
		}
		if *reuse != "" {
			n, err := adoptRuns(spec, strings.Split(*reuse, ","), *out)
			if err != nil {
				return err
			}
			fmt.Fprintf(stderr, "sweep: %d runs taken from %s\n", n, *reuse)
		}
		todo := []int{*job}
		if *job < 0 {
			todo = nil
			for k := range spec.Jobs() {
				if *resume || *reuse != "" {
					if _, err := os.Stat(sweep.RunFile(*out, k)); err == nil {
						continue
					}
				}
				todo = append(todo, k)
			}
		}
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
		run, err := makeRunner()
		if err != nil {
			return err
		}
		if *progress {
			fmt.Fprintf(stderr, "sweep %s: %d points x %d seeds = %d runs, %d to run, %d at once\n",
				spec.ID(), spec.Points(), spec.Seeds, spec.Jobs(), len(todo), min(jobs, max(1, len(todo))))
		}
		finished, unfinished := 0, 0
		t0 := time.Now()
		err = spec.RunJobs(todo, jobs, run, func(k int, r *sweep.Run, res *sim.Result, err error, wall time.Duration) {
			if err != nil {
				return
			}
			finished++
			if werr := sweep.WriteRun(*out, r); werr != nil {
				fmt.Fprintf(stderr, "job %d: %v\n", k, werr)
			}
			if res.Completed+res.Failed < res.Flows {
				unfinished++
			}
			if *progress {
				fmt.Fprintf(stderr, "[%d/%d] job %d %s seed %d: completion_rel %.3f, %d/%d flows, %.1f s (%.0f s elapsed)\n",
					finished, len(todo), k, spec.Label(r.Point), r.Seed, res.Ratio, res.Completed, res.Flows, wall.Seconds(), time.Since(t0).Seconds())
			}
		})
		if err != nil {
			return err
		}
		if unfinished > 0 {
			fmt.Fprintf(stderr, "sweep: %d runs had flows unfinished at the deadline (column unfinished; their completion_rel is 0)\n", unfinished)
		}
		if *job >= 0 {
			return nil
		}
		runs, err := sweep.ReadRuns(*out)
		if err != nil {
			return err
		}
		t, err := sweep.Merge(runs)
		if err != nil {
			return err
		}
		if err := writeSweep(t, *out, *metric, *plots, *cdf, md, stdout, stderr); err != nil {
			return err
		}
		if !*keepRuns {
			return os.RemoveAll(filepath.Join(*out, "runs"))
		}
		return nil
	}
}

// adoptRuns copies into out/runs, renumbered, every run under dirs that is one of spec's
// jobs (sweep.Spec.Adopt) and not there yet; it returns how many it copied.
func adoptRuns(spec *sweep.Spec, dirs []string, out string) (int, error) {
	n := 0
	for _, dir := range dirs {
		runs, err := sweep.ReadRuns(dir)
		if err != nil {
			return n, fmt.Errorf("-reuse: %w", err)
		}
		for _, r := range runs {
			c, ok := spec.Adopt(r)
			if !ok {
				continue
			}
			if _, err := os.Stat(sweep.RunFile(out, c.Job)); err == nil {
				continue
			}
			if err := sweep.WriteRun(out, c); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// writeSweep writes the merged table as CSV, JSON and plots into dir and the chosen
// metrics as markdown on stdout; with cdf (an axis) also the FCT CDF plots.
func writeSweep(t *sweep.Table, dir, metric, plots, cdf string, md func(*sweep.Table, io.Writer) error, stdout, stderr io.Writer) error {
	if _, err := t.Metric(metric); err != nil {
		return fmt.Errorf("-metric: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, f := range map[string]func(io.Writer) error{"sweep.csv": t.WriteCSV, "sweep.json": t.WriteJSON} {
		fh, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := f(fh); err != nil {
			fh.Close()
			return err
		}
		if err := fh.Close(); err != nil {
			return err
		}
	}
	for _, ext := range plotExts(plots) {
		if err := t.Plot(filepath.Join(dir, "sweep_"+metric+"."+ext), metric); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		if cdf != "" {
			if _, err := t.PlotCDFs(dir, cdf, ext); err != nil {
				return fmt.Errorf("plot: %w", err)
			}
		}
	}
	fmt.Fprintf(stderr, "wrote %s\n", filepath.Join(dir, "sweep.{csv,json}"))
	return md(t, stdout)
}

// emitJobs prints or writes one command line per job: the same sweep with -job K.
func emitJobs(mode sweepMode, spec *sweep.Spec, fs *pflag.FlagSet, out string, print bool, file string, stdout, stderr io.Writer) error {
	base := []string{"smartt-lab", mode.group, "sweep", spec.Scenario}
	for _, a := range spec.Axes {
		base = append(base, "-set", a.String())
	}
	base = append(base, "-seeds", fmt.Sprint(spec.Seeds), "-out", out)
	// Flags of the mode (testbed -name, -timeout) travel with every job.
	fs.Visit(func(f *pflag.Flag) {
		if slices.Contains([]string{"name", "timeout"}, f.Name) {
			base = append(base, "-"+f.Name, f.Value.String())
		}
	})
	var b strings.Builder
	for k := range spec.Jobs() {
		line := append(slices.Clone(base), "-job", fmt.Sprint(k))
		for i, w := range line {
			line[i] = shellQuote(w)
		}
		b.WriteString(strings.Join(line, " ") + "\n")
	}
	if print {
		fmt.Fprint(stdout, b.String())
	}
	if file != "" {
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "%d jobs (Slurm: --array=0-%d; Kubernetes: an Indexed Job with completions %d); then: smartt-lab %s sweep -merge %s\n",
		spec.Jobs(), spec.Jobs()-1, spec.Jobs(), mode.group, shellQuote(out))
	return nil
}

// shellQuote quotes w for a POSIX shell unless it is plainly safe.
func shellQuote(w string) string {
	safe := w != ""
	for _, c := range w {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./=,:+@%", c)) {
			safe = false
			break
		}
	}
	if safe {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
