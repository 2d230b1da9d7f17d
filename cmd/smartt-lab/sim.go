package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/sim"
	"github.com/smartt-transport/smartt/test/sweep"
)

// bindSim declares the flags of "smartt-lab sim run" on fs.
func bindSim(stderr io.Writer, fs *pflag.FlagSet) cli.RunFunc {
	seed := fs.Uint64("seed", 0, "random seed (0: the scenario's)")
	lb := fs.String("lb", "", "load balancer (transport lb): ecmp, ops, reps, plb, flowlet, mptcp")
	cc := fs.String("cc", "", "congestion controller (transport cc), e.g. fixed")
	hosts := fs.Int("hosts", 0, "number of hosts (0: the scenario's)")
	osub := fs.Int("oversubscription", 0, "ToR oversubscription 1..8 (0: the scenario's)")
	size := fs.String("size", "", "message size, e.g. 2MiB or 512k (empty: the scenario's)")
	out := fs.String("out", "", "directory for result.json, flows.csv, queues.csv and plots (empty: none)")
	plots := fs.String("plots", "png", "plot formats written to -out: png, svg, both or none")
	progress := fs.Bool("progress", true, "print a progress line every few seconds")
	jsonOut := fs.Bool("json", false, "print the JSON summary instead of text")
	cpuProf := fs.String("cpuprofile", "", "write a CPU profile (pprof) of the run to this file")
	shards := fs.Int("shards", 0, "goroutines (cores) running the fabric's two halves: 1 or 2, same result (0: the scenario's sim.shards)")
	rtt := fs.Bool("rtt", false, "also report the senders' RTT distribution, one sample per ACK (output.rtt)")
	compare := fs.String("compare", "", "run once per balancer in this comma-separated list (e.g. ecmp,ops,reps) and print a comparison; -out gets one FCT CDF of all")
	return func(args []string, stdout io.Writer) error {
		load := func() (*sim.Scenario, error) {
			sc, err := loadScenario(args[0])
			if err != nil {
				return nil, err
			}
			if *shards != 0 {
				sc.Sim.Shards = *shards
			}
			sc.Output.RTT = sc.Output.RTT || *rtt
			return sc, applySimFlags(sc, *seed, *lb, *cc, *hosts, *osub, *size)
		}
		switch *plots {
		case "png", "svg", "both", "none":
		default:
			return fmt.Errorf("-plots = %q: must be png, svg, both or none", *plots)
		}
		if *compare != "" {
			return runSimCompare(load, strings.Split(*compare, ","), *out, *plots, *progress, stdout, stderr)
		}
		sc, err := load()
		if err != nil {
			return err
		}
		s, err := sim.New(sc)
		if err != nil {
			return err
		}
		if *progress {
			s.SetProgress(stderr)
		}
		if *cpuProf != "" {
			f, err := os.Create(*cpuProf)
			if err != nil {
				return err
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			defer f.Close()
		}
		r := s.Run()
		if *cpuProf != "" {
			pprof.StopCPUProfile()
		}
		if *jsonOut {
			if err := r.WriteJSON(stdout); err != nil {
				return err
			}
		} else {
			fmt.Fprint(stdout, r.Summary())
			var ru syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			// Per CPU second of the process: the garbage collector's share included, and
			// both cores' with -shards 2.
			cpu := float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
			fmt.Fprintf(stdout, "peak memory %.0f MiB (max RSS); %.2fM hops per CPU second (%.1f CPU s, %d cores available); output hash %s\n",
				float64(ru.Maxrss)/1024, float64(r.Hops)/cpu/1e6, cpu, runtime.NumCPU(), r.Hash()[:16])
			if st := s.ShardStats(); st.Parts > 1 {
				fmt.Fprintf(stdout, "halves on %d goroutine(s): %d windows of %d ns; thread CPU %.2f s + %.2f s, critical path %.2f s (two idle cores: at most %.2fx this work's single-core time)\n",
					st.Workers, st.Windows, st.Lookahead, st.CPU[0], st.CPU[1], st.Critical, (st.CPU[0]+st.CPU[1])/max(st.Critical, 1e-9))
			}
		}
		if *out != "" {
			if err := writeSimOutputs(*out, *plots, "", r); err != nil {
				return err
			}
		}
		return unfinished(r)
	}
}

func unfinished(r *sim.Result) error {
	if r.Completed+r.Failed < r.Flows {
		return fmt.Errorf("sim: %s: %d of %d flows unfinished at the deadline (%v)", r.LB, r.Flows-r.Completed-r.Failed, r.Flows, config.Duration(r.SimTime))
	}
	return nil
}

// runSimCompare runs the scenario once per balancer and prints one row each.
func runSimCompare(load func() (*sim.Scenario, error), lbs []string, out, plots string, progress bool, stdout, stderr io.Writer) error {
	var rs []*sim.Result
	for _, lb := range lbs {
		sc, err := load()
		if err != nil {
			return err
		}
		sc.Transport.LB = strings.TrimSpace(lb)
		s, err := sim.New(sc)
		if err != nil {
			return fmt.Errorf("lb %s: %w", lb, err)
		}
		if progress {
			s.SetProgress(stderr)
		}
		r := s.Run()
		fmt.Fprint(stdout, r.Summary(), "\n")
		if out != "" {
			if err := writeSimOutputs(out, "none", "_"+sc.Transport.LB, r); err != nil {
				return err
			}
		}
		rs = append(rs, r)
	}
	fmt.Fprintf(stdout, "%-8s %-8s %10s %10s %10s %8s %8s %8s\n", "lb", "cc", "completion", "ideal", "rel", "maxslow", "trims", "retx")
	for _, r := range rs {
		fmt.Fprintf(stdout, "%-8s %-8s %8.2fus %8.2fus %10.3f %8.3f %8d %8d\n", r.LB, r.CC, float64(r.Completion)/1e3,
			float64(r.Ideal)/1e3, r.Ratio, r.FCT.MaxSlowdown, r.Trims, r.RetxSack+r.RetxNack+r.RetxTimeout)
	}
	if out != "" {
		for _, ext := range plotExts(plots) {
			if err := sim.PlotFCTCDF(filepath.Join(out, "fct_cdf."+ext), rs...); err != nil {
				return err
			}
		}
	}
	for _, r := range rs {
		if err := unfinished(r); err != nil {
			return err
		}
	}
	return nil
}

func plotExts(plots string) []string {
	switch plots {
	case "png", "svg":
		return []string{plots}
	case "both":
		return []string{"png", "svg"}
	}
	return nil
}

// applySimFlags applies the command-line overrides to a scenario.
func applySimFlags(sc *sim.Scenario, seed uint64, lb, cc string, hosts, osub int, size string) error {
	if seed != 0 {
		sc.Seed = seed
	}
	if lb != "" {
		sc.Transport.LB = lb
	}
	if cc != "" {
		sc.Transport.CC = cc
	}
	if hosts != 0 {
		sc.Topology.Hosts = hosts
	}
	if osub != 0 {
		sc.Topology.Oversubscription = osub
	}
	if size != "" {
		n, err := cli.ParseSize(size)
		if err != nil {
			return cli.Usagef("--size: %v", err)
		}
		sc.Workload.Size = sim.Size(n)
	}
	return nil
}

// writeSimOutputs writes result<suffix>.json, flows<suffix>.csv, queues<suffix>.csv and
// the plots into dir.
func writeSimOutputs(dir, plots, suffix string, r *sim.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	write := func(name string, f func(io.Writer) error) error {
		fh, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := f(fh); err != nil {
			fh.Close()
			return fmt.Errorf("%s: %w", name, err)
		}
		return fh.Close()
	}
	if err := write("result"+suffix+".json", r.WriteJSON); err != nil {
		return err
	}
	if err := write("flows"+suffix+".csv", r.WriteFlowsCSV); err != nil {
		return err
	}
	if len(r.Samples) > 0 {
		if err := write("queues"+suffix+".csv", r.WriteSamplesCSV); err != nil {
			return err
		}
	}
	if len(r.Windows) > 0 {
		if err := write("windows"+suffix+".csv", r.WriteWindowsCSV); err != nil {
			return err
		}
	}
	if len(r.Util) > 0 {
		if err := write("util"+suffix+".csv", r.WriteUtilCSV); err != nil {
			return err
		}
	}
	for _, ext := range plotExts(plots) {
		if err := sim.PlotFCTCDF(filepath.Join(dir, "fct_cdf"+suffix+"."+ext), r); err != nil && !strings.Contains(err.Error(), "no completed") {
			return err
		}
		if len(r.Samples) > 0 {
			if err := sim.PlotQueues(filepath.Join(dir, "queues"+suffix+"."+ext), r, 8); err != nil {
				return err
			}
		}
		if len(r.Windows) > 0 {
			if err := sim.PlotWindows(filepath.Join(dir, "windows"+suffix+"."+ext), r, 8); err != nil {
				return err
			}
		}
		if len(r.Util) > 0 {
			if err := sim.PlotUtil(filepath.Join(dir, "util"+suffix+"."+ext), r, 8); err != nil {
				return err
			}
		}
	}
	return nil
}

// newSimCmd is "smartt-lab sim".
func newSimCmd(stderr io.Writer) *cobra.Command {
	return cli.Group("sim", "the discrete-event fabric simulator (docs/sim.md)",
		"smartt-lab sim run SCENARIO runs a discrete-event fabric simulation whose hosts run the\n"+
			"real transport engine (docs/sim.md); its flags override the scenario file. SCENARIO is a\n"+
			"file or the name of a shipped scenario (permutation_128, incast_128, ...), in every sim command.",
		cli.Leaf("run [flags] SCENARIO", "run a fabric simulation scenario and print its summary",
			"Runs a discrete-event fabric simulation whose hosts run the real transport engine\n"+
				"(docs/sim.md). SCENARIO is a file or a shipped scenario's name; flags override it.",
			scenarioArg, func(fs *pflag.FlagSet) cli.RunFunc { return bindSim(stderr, fs) }),
		cli.Leaf("sweep [flags] SCENARIO -set FIELD=V1,V2 ... -out DIR", "run a scenario over a grid of field values and seeds; CSV, JSON and a plot of mean and spread",
			fmt.Sprintf(sweepUsage, "sim"), cobra.MaximumNArgs(1), func(fs *pflag.FlagSet) cli.RunFunc { return bindSweep(simSweep, stderr, fs) }),
		cli.Leaf("ailb [flags] -scenarios S1,S2 -variants V1,V2 -x FIELD=X1,X2", "the AI-training load-balancing study: completion and loss per variant against an axis, median and spread over seeds (docs/results/ai-lb.md)",
			ailbLong, cobra.NoArgs, func(fs *pflag.FlagSet) cli.RunFunc { return bindAILB(stderr, fs) }))
}

// loadScenario reads SCENARIO as every lab command does: a file, or else a shipped
// scenario's name (incast_128 or incast_128.yaml), as sim sweep finds it.
func loadScenario(ref string) (*sim.Scenario, error) {
	if _, err := os.Stat(ref); err == nil || strings.ContainsAny(ref, "/\\") {
		return sim.LoadScenario(ref)
	}
	b, err := sweep.LoadScenario(ref)
	if err != nil {
		return nil, err
	}
	sc, err := sim.ParseScenario(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	return sc, nil
}

// scenarioArg wants exactly one scenario: a file or a shipped name.
func scenarioArg(c *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s: want exactly one scenario (a file or a shipped name such as incast_128), got %d arguments", c.CommandPath(), len(args))
	}
	return nil
}
