package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cc/rlcc"
	"github.com/smartt-transport/smartt/cc/rlcc/lstm"
	"github.com/smartt-transport/smartt/cc/rlcc/rlccnet"
	"github.com/smartt-transport/smartt/cc/rlcc/train"
	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport"
)

const rlccUsage = `RL-CC's learning pipeline on the simulator (docs/rlcc.md): train the policy network with
the paper's deterministic on-policy gradient on incasts through one switch port, distill
it into boosted oblivious trees, and compare them (Table VI, Fig. 3, Fig. 4).
The embedded default is reproduced by:
  smartt-lab rlcc train -out /tmp/rl && smartt-lab rlcc distill -policy /tmp/rl/policy.json -o model.json`

// newRLCCCmd is the rlcc command group.
func newRLCCCmd(stderr io.Writer) *cobra.Command {
	sub := func(name, short string, bind func(io.Writer, *pflag.FlagSet) cli.RunFunc) *cobra.Command {
		return cli.Leaf(name+" [flags]", short, "", cobra.NoArgs, func(fs *pflag.FlagSet) cli.RunFunc { return bind(stderr, fs) })
	}
	return cli.Group("rlcc", "RL-CC training, distillation and evaluation on the simulator (docs/rlcc.md)", rlccUsage,
		sub("train", "train the RL-CC policy network in the simulator", bindRLCCTrain),
		sub("distill", "distill a trained policy into boosted oblivious trees", bindRLCCDistill),
		sub("table", "the policy's action by previous x current state beside the paper's Table VI", bindRLCCTable),
		sub("table1", "operations and decision time: LSTM teacher, MLP and trees beside the paper's Table I", bindRLCCTable1),
		sub("fig3", "RTT inflation, goodput and losses vs number of flows: network, trees, Eq. 2", bindRLCCFig3),
		sub("fig4", "the trees' RTT inflation and goodput across target and beta settings", bindRLCCFig4),
		sub("compare", "RL-CC against the other registered controllers on the same incasts", bindRLCCCompare),
		sub("longshort", "the paper's long-short test: long flows joined by a burst of short ones", bindRLCCLongshort),
		sub("tables", "Figs. 6-7 and Tables IV-V: many-to-one, all-to-all on the 64-host tree, long-short", bindRLCCTables),
		sub("fig8", "Fig. 8: the all-to-all on the 64-host tree over time, per controller", bindRLCCFig8),
		sub("lstm", "train the paper's LSTM teacher, distil it, compare teacher and trees (Table I)", bindRLCCLSTM))
}

// durFlag is a duration flag read like the scenario files (5ms, 800us).
type durFlag struct{ d *int64 }

// String formats the duration.
func (f durFlag) String() string {
	if f.d == nil {
		return ""
	}
	return config.Duration(*f.d).String()
}

// Type names the flag's value in help.
func (f durFlag) Type() string { return "duration" }

// Set parses a duration.
func (f durFlag) Set(s string) error {
	var d config.Duration
	if err := d.UnmarshalText([]byte(s)); err != nil {
		return err
	}
	*f.d = int64(d)
	return nil
}

// bindEpisodes declares the flags of the incast episodes train and distill run.
func bindEpisodes(fs *pflag.FlagSet, seed *uint64, seedUsage string, minFlows, maxFlows *int, episodeNs *int64) {
	fs.Uint64Var(seed, "seed", *seed, seedUsage)
	fs.IntVar(minFlows, "min-flows", *minFlows, "smallest incast")
	fs.IntVar(maxFlows, "max-flows", *maxFlows, "largest incast")
	fs.Var(durFlag{episodeNs}, "episode", "simulated time per episode")
}

// bindRLCCTrain declares the flags of "smartt-lab rlcc train" on fs.
func bindRLCCTrain(progress io.Writer, fs *pflag.FlagSet) cli.RunFunc {
	quiet := fs.BoolP("quiet", "q", false, "no progress lines")
	c := train.DefaultConfig()
	bindEpisodes(fs, &c.Seed, "seed of the initial weights and of every episode", &c.MinFlows, &c.MaxFlows, &c.EpisodeNs)
	fs.IntVar(&c.Iterations, "iterations", c.Iterations, "episodes")
	fs.IntVar(&c.Rollout, "rollout", c.Rollout, "transitions per gradient step")
	fs.Float64Var(&c.LR, "lr", c.LR, "Adam step size")
	fs.IntVar(&c.Horizon, "horizon", c.Horizon, "decisions whose delta credit an action")
	fs.Float64Var(&c.WeightClip, "weight-clip", c.WeightClip, "delta/target is clipped to [-weight-clip, 1]")
	fs.IntVar(&c.CheckpointEvery, "checkpoint-every", c.CheckpointEvery, "episodes between checkpoints")
	dir := fs.String("out", "rlcc-train", "directory for policy.json, curve.csv, curve.png, checkpoints")
	resume := fs.String("resume", "", "checkpoint to resume from (same flags)")
	return func(_ []string, out io.Writer) error {
		c.Dir = *dir
		if !*quiet {
			c.Progress = progress
		}
		if err := os.MkdirAll(c.Dir, 0o755); err != nil {
			return err
		}
		var t *train.Trainer
		var err error
		if *resume != "" {
			t, err = train.Resume(c, *resume)
		} else {
			t, err = train.New(c)
		}
		if err != nil {
			return err
		}
		start := time.Now()
		if err := t.Run(); err != nil {
			return err
		}
		n := len(t.Curve)
		tail := t.Curve[max(0, n-50):]
		head := t.Curve[:min(50, n)]
		fmt.Fprintf(out, "trained %d episodes in %.1f s: mean reward of the first %d episodes %.4f, of the last %d %.4f\n",
			c.Iterations, time.Since(start).Seconds(), len(head), meanReward(head), len(tail), meanReward(tail))
		fmt.Fprint(out, "| episodes | decisions | mean reward, whole episode | second half |\n|---|---|---|---|\n")
		for lo := 0; lo < n; lo += 100 {
			blk := t.Curve[lo:min(lo+100, n)]
			var d int
			var r, st float64
			for _, e := range blk {
				d += e.Decisions
				r += e.Reward / float64(len(blk))
				st += e.Steady / float64(len(blk))
			}
			fmt.Fprintf(out, "| %d-%d | %d | %.2f | %.2f |\n", blk[0].Iter, blk[len(blk)-1].Iter, d, r, st)
		}
		fmt.Fprintf(out, "wrote %s, %s, %s\n", filepath.Join(c.Dir, "policy.json"), filepath.Join(c.Dir, "curve.csv"), filepath.Join(c.Dir, "curve.png"))
		return nil
	}
}

// bindRLCCDistill declares the flags of "smartt-lab rlcc distill" on fs.
func bindRLCCDistill(progress io.Writer, fs *pflag.FlagSet) cli.RunFunc {
	quiet := fs.BoolP("quiet", "q", false, "no progress lines")
	policy := fs.String("policy", "", "policy network file (default: the embedded trained policy)")
	dc := train.DefaultDistillConfig()
	bindEpisodes(fs, &dc.Seed, "seed of the recording episodes", &dc.MinFlows, &dc.MaxFlows, &dc.EpisodeNs)
	fs.IntVar(&dc.Episodes, "episodes", dc.Episodes, "recording episodes")
	fs.IntVar(&dc.PerEpisode, "per-episode", dc.PerEpisode, "decisions kept per episode")
	fs.IntVar(&dc.HoldOut, "hold-out", dc.HoldOut, "every n-th episode is held out")
	fs.IntVar(&dc.Fit.Trees, "trees", dc.Fit.Trees, "boosted trees (<= 10 for the NIC)")
	fs.IntVar(&dc.Fit.Depth, "depth", dc.Fit.Depth, "tree depth (<= 4 for the NIC)")
	fs.Float64Var(&dc.Fit.LearningRate, "fit-lr", dc.Fit.LearningRate, "boosting shrinkage")
	fs.Float64Var(&dc.Fit.L2, "l2", dc.Fit.L2, "L2 regularisation of leaf values")
	fs.IntVar(&dc.Fit.Borders, "borders", dc.Fit.Borders, "candidate split borders per feature (quantiles)")
	o := fs.StringP("output", "o", "", "output model file (default stdout)")
	return func(_ []string, out io.Writer) error {
		if !*quiet {
			dc.Progress = progress
		}
		net, pj, err := loadPolicy(*policy)
		if err != nil {
			return err
		}
		m, rep, err := train.Distill(net, pj, dc)
		if err != nil {
			return err
		}
		if err := m.Validate(rlcc.DefaultLimits); err != nil {
			return err
		}
		b, err := m.Marshal()
		if err != nil {
			return err
		}
		p, err := rlcc.NewParamsWithModel(rlcc.DefaultConfig(), config.Network{LinkRate: 100e9, BaseRTT: 10_000, MTU: 4096}, m)
		if err != nil {
			return err
		}
		fmt.Fprintf(progress, "distilled: %d trees, %d ops per decision; %d training samples, RMSE %.4f; %d held-out samples, RMSE %.4f, max |error| %.4f (policy's mean |a-1| there %.4f)\n",
			len(m.Trees), p.DecisionOps(), rep.Train, rep.TrainRMSE, rep.Test, rep.TestRMSE, rep.TestMaxAbs, rep.TestMeanAbsInput)
		if *o == "" {
			_, err = out.Write(b)
			return err
		}
		return os.WriteFile(*o, b, 0o644)
	}
}

// bindRLCCTable declares the flags of "smartt-lab rlcc table" on fs.
func bindRLCCTable(progress io.Writer, fs *pflag.FlagSet) cli.RunFunc {
	policy := fs.String("policy", "", "policy network file (default: the embedded trained policy)")
	model := fs.String("model", "", "tree model file (default: the embedded model)")
	return func(_ []string, out io.Writer) error {
		net, _, err := loadPolicy(*policy)
		if err != nil {
			return err
		}
		cfg := rlcc.DefaultConfig()
		cfg.Model = *model
		m, err := cfg.LoadModel()
		if err != nil {
			return err
		}
		printTable(out, "network", rlcc.ActionTable(train.NetAction(net, cfg), cfg.Target), 0)
		printTable(out, "trees", rlcc.ActionTable(train.TreeAction(m, cfg), cfg.Target), rlcc.DistillTol)
		printTable(out, "paper (Table VI)", rlcc.TableVI, 0)
		return nil
	}
}

// bindRLCCTable1 declares the flags of "smartt-lab rlcc table1" on fs.
func bindRLCCTable1(_ io.Writer, fs *pflag.FlagSet) cli.RunFunc {
	rounds := fs.Int("rounds", 9, "interleaved timing rounds (the spread is over them)")
	batch := fs.Duration("batch", 20*time.Millisecond, "time per batch of decisions")
	lstmPath := fs.String("lstm", "", "trained LSTM file (smartt-lab rlcc lstm -out DIR: DIR/lstm.json; default: seeded weights)")
	return func(_ []string, out io.Writer) error {
		if *rounds < 1 || *rounds > 1000 || *batch <= 0 || *batch > 10*time.Second {
			return fmt.Errorf("-rounds %d, -batch %v: want 1..1000 rounds of up to 10s", *rounds, *batch)
		}
		net, _, err := loadPolicy("")
		if err != nil {
			return err
		}
		m, err := rlcc.DefaultConfig().LoadModel()
		if err != nil {
			return err
		}
		var lm *lstm.LSTM
		lstmDesc := "seeded weights"
		if *lstmPath != "" {
			b, err := os.ReadFile(*lstmPath)
			if err != nil {
				return err
			}
			if lm, _, err = lstm.Parse(b); err != nil {
				return err
			}
			lstmDesc = "trained"
		}
		archs, err := train.Table1(m, net, lm, *rounds, *batch)
		if err != nil {
			return err
		}
		printTable1(out, archs, *rounds, lstmDesc)
		return nil
	}
}

// table1Paper is the paper's Table I: FLOPS and decision time on the ConnectX-6Dx.
var table1Paper = map[string]string{"LSTM": "2600 | 450 us", "MLP": "200 | 17 us", "trees": "- | 0.9 us"}

// printTable1 prints Table I's rows and the ratios to the trees, per round.
func printTable1(out io.Writer, archs []train.Table1Arch, rounds int, lstmDesc string) {
	desc := map[string]string{"trees": "trees (10 x depth 4, distilled; integer)", "MLP": "MLP 4-12-12-1 (the trained policy)",
		"LSTM": "LSTM: FC 32-16, LSTM 16, FC 1 (" + lstmDesc + ")"}
	fmt.Fprintf(out, "Decision time on this CPU: median (min..max) of %d interleaved rounds.\n\n", rounds)
	fmt.Fprint(out, "| architecture | multiply-adds | operations per decision | parameters | per-flow state (bytes) | decision time here (ns) | paper: FLOPS | paper: decision time |\n|---|---|---|---|---|---|---|---|\n")
	for i := len(archs) - 1; i >= 0; i-- {
		a := archs[i]
		macs, ops, params := "-", fmt.Sprintf("%d flops", a.Ops), fmt.Sprint(a.Params)
		if a.MACs > 0 {
			macs = fmt.Sprint(a.MACs)
		} else {
			ops, params = fmt.Sprintf("%d integer ops", a.Ops), fmt.Sprintf("%d bytes", a.Params)
		}
		lo, med, hi := train.Quantiles(a.Ns)
		fmt.Fprintf(out, "| %s | %s | %s | %s | %d | %.0f (%.0f..%.0f) | %s |\n", desc[a.Name], macs, ops, params, a.State, med, lo, hi, table1Paper[a.Name])
	}
	tree := archs[0]
	fmt.Fprint(out, "\n| ratio to the trees | operations | decision time here: median (min..max over rounds) | paper's decision time |\n|---|---|---|---|\n")
	for _, a := range archs[1:] {
		lo, med, hi := train.Quantiles(train.Ratios(a.Ns, tree.Ns))
		paper := map[string]string{"LSTM": "x500 (450 / 0.9)", "MLP": "x19 (17 / 0.9)"}[a.Name]
		fmt.Fprintf(out, "| %s | x%.1f (%d flops / %d ops; x%.1f in multiply-adds) | x%.1f (%.1f..%.1f) | %s |\n", a.Name,
			float64(a.Ops)/float64(tree.Ops), a.Ops, tree.Ops, float64(a.MACs)/float64(tree.Ops), med, lo, hi, paper)
	}
}

// bindRLCCFig3 declares the flags of "smartt-lab rlcc fig3" on fs.
func bindRLCCFig3(progress io.Writer, fs *pflag.FlagSet) cli.RunFunc {
	inc := bindIncast(fs, progress, "2,4,8,16,32,64,128,256,512,1024", 3)
	policy := fs.String("policy", "", "policy network file (default: the embedded trained policy)")
	model := fs.String("model", "", "tree model file (default: the embedded model)")
	warm, measure := int64(10_000_000), int64(10_000_000)
	fs.Var(durFlag{&warm}, "warm", "warm-up before measuring")
	fs.Var(durFlag{&measure}, "measure", "measured window")
	dir := fs.String("out", "", "directory for fig3.png (default: none)")
	env := train.DefaultEnv()
	fs.Float64Var(&env.RLCC.Target, "target", env.RLCC.Target, "the controllers' target (the policy was trained at 0.064)")
	fs.Float64Var(&env.RLCC.Beta, "beta", env.RLCC.Beta, "the controllers' beta (the policy was trained at 1.5)")
	which := fs.String("policies", "network,trees,swift", "policies to run: network, trees and/or registered controllers (swift: the paper's other curve)")
	return func(_ []string, out io.Writer) error {
		if err := env.RLCC.Validate(); err != nil {
			return err
		}
		ns, err := inc.parse()
		if err != nil {
			return err
		}
		net, _, err := loadPolicy(*policy)
		if err != nil {
			return err
		}
		cfg := env.RLCC
		cfg.Model = *model
		m, err := cfg.LoadModel()
		if err != nil {
			return err
		}
		var pols []train.Policy
		for _, w := range strings.Split(*which, ",") {
			switch strings.TrimSpace(w) {
			case "network":
				pols = append(pols, &train.NetPolicy{Net: net, Cfg: env.RLCC})
			case "trees":
				pols = append(pols, &train.TreePolicy{Model: m, Cfg: env.RLCC})
			default:
				if _, ok := transport.LookupCC(strings.TrimSpace(w)); !ok {
					return fmt.Errorf("-policies: %q: want network, trees or registered controllers separated by commas", w)
				}
				pols = append(pols, &train.CCPolicy{CC: strings.TrimSpace(w)})
			}
		}
		rows, err := train.Fig3(env, pols, ns, *inc.seeds, warm, measure, inc.progress())
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "target %g, beta %g\n\n", env.RLCC.Target, env.RLCC.Beta)
		fmt.Fprintf(out, "| N | policy | mean RTT inflation (min..max over %d seeds) | Eq. 2 | deviation | goodput | losses per flow | trims (whole run) |\n|---|---|---|---|---|---|---|---|\n", *inc.seeds)
		for _, r := range rows {
			fmt.Fprintf(out, "| %d | %s | %.3f (%.3f..%.3f) | %.3f | %+.1f %% | %.3f (%.3f..%.3f) | %.2f | %.0f |\n", r.Flows, r.Policy,
				r.Inflation.Mean, r.Inflation.Min, r.Inflation.Max, r.Eq2, 100*(r.Inflation.Mean/r.Eq2-1),
				r.Goodput.Mean, r.Goodput.Min, r.Goodput.Max, r.Losses.Mean, r.Trims.Mean)
		}
		var fits map[string]train.SqrtFit
		if len(ns) >= 2 {
			var names []string
			if names, fits, err = train.Fig3Fits(rows); err != nil {
				return err
			}
			printFits(out, names, fits, rows, env.RLCC)
		}
		if *dir != "" {
			if err := os.MkdirAll(*dir, 0o755); err != nil {
				return err
			}
			return train.PlotFig3(filepath.Join(*dir, "fig3.png"), rows, fits)
		}
		return nil
	}
}

// printFits prints each policy's least-squares a*sqrt(N)+b beside Eq. 2's, with the
// largest relative deviation of its means from its own fit (the paper: RL-CC follows
// Eq. 2, Swift departs from its best fit as N grows).
func printFits(out io.Writer, names []string, fits map[string]train.SqrtFit, rows []train.Fig3Row, cfg rlcc.Config) {
	fmt.Fprintf(out, "\nLeast-squares fit of the mean inflation, a*sqrt(N) + b (Eq. 2: a = target = %g, b = beta = %g):\n\n", cfg.Target, cfg.Beta)
	fmt.Fprint(out, "| policy | a | b | R^2 | largest deviation of a mean from the fit | at N | deviation at the largest N |\n|---|---|---|---|---|---|---|\n")
	for _, name := range names {
		f := fits[name]
		worst, at, last := 0.0, 0, 0.0
		for _, r := range rows {
			if r.Policy != name {
				continue
			}
			d := r.Inflation.Mean/f.At(r.Flows) - 1
			if math.Abs(d) > math.Abs(worst) {
				worst, at = d, r.Flows
			}
			last = d
		}
		fmt.Fprintf(out, "| %s | %.4f | %.3f | %.4f | %+.1f %% | %d | %+.1f %% |\n", name, f.A, f.B, f.R2, 100*worst, at, 100*last)
	}
}

// bindRLCCCompare declares the flags of "smartt-lab rlcc compare" on fs.
func bindRLCCCompare(progress io.Writer, fs *pflag.FlagSet) cli.RunFunc {
	inc := bindIncast(fs, progress, "4,16,64,256,1024", 2)
	ccs := fs.String("ccs", "rlcc,smartt,nscc,swift,dcqcn", "registered congestion controllers")
	warm, measure := int64(10_000_000), int64(10_000_000)
	fs.Var(durFlag{&warm}, "warm", "warm-up before measuring")
	fs.Var(durFlag{&measure}, "measure", "measured window")
	return func(_ []string, out io.Writer) error {
		in, err := inc.parse()
		if err != nil {
			return err
		}
		names, err := parseCCs(*ccs)
		if err != nil {
			return err
		}
		var pols []train.Policy
		for _, name := range names {
			pols = append(pols, &train.CCPolicy{CC: name})
		}
		rows, err := train.Fig3(train.DefaultEnv(), pols, in, *inc.seeds, warm, measure, inc.progress())
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "| N | cc | goodput (min..max over %d seeds) | mean RTT inflation | losses per flow | trims (whole run) |\n|---|---|---|---|---|---|\n", *inc.seeds)
		for _, r := range rows {
			fmt.Fprintf(out, "| %d | %s | %.3f (%.3f..%.3f) | %.3f (%.3f..%.3f) | %.2f | %.0f |\n", r.Flows, r.Policy,
				r.Goodput.Mean, r.Goodput.Min, r.Goodput.Max, r.Inflation.Mean, r.Inflation.Min, r.Inflation.Max, r.Losses.Mean, r.Trims.Mean)
		}
		return nil
	}
}

// bindRLCCLongshort declares the flags of "smartt-lab rlcc longshort" on fs.
func bindRLCCLongshort(progress io.Writer, fs *pflag.FlagSet) cli.RunFunc {
	quiet := fs.BoolP("quiet", "q", false, "no progress lines")
	ccs := fs.String("ccs", "rlcc,smartt,nscc,swift,dcqcn", "registered congestion controllers")
	ls := train.LongShort{Long: 1, Short: 50, ShortSize: 64 << 10, Burst: 5_000_000, End: 10_000_000}
	fs.IntVar(&ls.Long, "long", ls.Long, "long flows")
	fs.IntVar(&ls.Short, "short", ls.Short, "short flows in the burst")
	cli.SizeVar(fs, &ls.ShortSize, "short-size", ls.ShortSize, 1, 1<<30, "bytes per short flow, e.g. 64KiB")
	fs.Var(durFlag{&ls.Burst}, "burst", "when the short flows start")
	fs.Var(durFlag{&ls.End}, "end", "end of the run")
	seeds := fs.Int("seeds", 3, "seeds per row (the spread is min..max)")
	return func(_ []string, out io.Writer) error {
		if err := checkSeeds(*seeds); err != nil {
			return err
		}
		names, err := parseCCs(*ccs)
		if err != nil {
			return err
		}
		env := train.DefaultEnv()
		fmt.Fprintf(out, "%d long, %d short of %d bytes at %v, until %v; over %d seeds (min..max)\n\n", ls.Long, ls.Short, ls.ShortSize,
			config.Duration(ls.Burst), config.Duration(ls.End), *seeds)
		fmt.Fprint(out, "| cc | long goodput before the burst | long goodput after it | long flows halved after (us) | back to 90 % after the burst drained (us) | short flows done | short slowdown, mean | max | short FCT, mean (us) | losses from the burst on |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, name := range names {
			var rs []train.LongShortStats
			for sd := 1; sd <= *seeds; sd++ {
				st, err := env.RunLongShort(&train.CCPolicy{CC: name}, ls, uint64(sd))
				if err != nil {
					return err
				}
				if !*quiet {
					fmt.Fprintf(progress, "%-8s seed %d: %+v\n", name, sd, st)
				}
				rs = append(rs, st)
			}
			sp := func(f func(train.LongShortStats) float64) string {
				lo, hi, m := f(rs[0]), f(rs[0]), 0.0
				for _, r := range rs {
					lo, hi, m = min(lo, f(r)), max(hi, f(r)), m+f(r)/float64(len(rs))
				}
				return fmt.Sprintf("%.3g (%.3g..%.3g)", m, lo, hi)
			}
			fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name,
				sp(func(r train.LongShortStats) float64 { return r.LongBefore }),
				sp(func(r train.LongShortStats) float64 { return r.LongAfter }),
				sp(func(r train.LongShortStats) float64 { return r.ReactUs }),
				sp(func(r train.LongShortStats) float64 { return r.RecoverUs }),
				sp(func(r train.LongShortStats) float64 { return float64(r.ShortDone) }),
				sp(func(r train.LongShortStats) float64 { return r.MeanSlow }),
				sp(func(r train.LongShortStats) float64 { return r.MaxSlow }),
				sp(func(r train.LongShortStats) float64 { return r.MeanFCTus }),
				sp(func(r train.LongShortStats) float64 { return float64(r.Losses) }))
		}
		return nil
	}
}

// bindRLCCTables declares the flags of "smartt-lab rlcc tables" on fs.
func bindRLCCTables(progress io.Writer, fs *pflag.FlagSet) cli.RunFunc {
	quiet := fs.BoolP("quiet", "q", false, "no progress lines")
	c := train.DefaultTablesConfig()
	ccs := fs.String("ccs", strings.Join(c.CCs, ","), "registered congestion controllers")
	fs.IntVar(&c.Seeds, "seeds", c.Seeds, "seeds per cell (the spread is min..max)")
	fs.Var(durFlag{&c.Warm}, "warm", "bring-up before measuring")
	fs.Var(durFlag{&c.Measure}, "measure", "measured window")
	m2o := fs.String("m2o", joinInts(c.ManyToOne), "many-to-one flow counts on one switch")
	tm2o := fs.String("tree-m2o", joinInts(c.TreeManyToOne), "many-to-one flow counts on the tree (<= hosts-1)")
	a2a := fs.String("a2a", joinInts(c.AllToAll), "all-to-all flow counts on the tree (multiples of its hosts)")
	ls := fs.String("longshort", "1/50,4/100", "long-short tests, long/short flows (burst at 5ms, end 10ms)")
	return func(_ []string, out io.Writer) error {
		var err error
		if c.LongShort, err = parseLongShorts(*ls, c.LongShort[0]); err != nil {
			return err
		}
		if c.CCs, err = parseCCs(*ccs); err != nil {
			return err
		}
		if err = checkSeeds(c.Seeds); err != nil {
			return err
		}
		if c.Warm < 0 || c.Measure < 1_000_000 {
			return fmt.Errorf("-warm %v, -measure %v: the window must be at least 1ms", config.Duration(c.Warm), config.Duration(c.Measure))
		}
		for _, f := range []struct {
			s   string
			dst *[]int
		}{{*m2o, &c.ManyToOne}, {*tm2o, &c.TreeManyToOne}, {*a2a, &c.AllToAll}} {
			if *f.dst, err = parseFlows(f.s); err != nil {
				return err
			}
		}
		if !*quiet {
			c.Progress = progress
		}
		return train.RunTables(train.DefaultEnv(), c, out)
	}
}

// parseLongShorts reads "long/short,..." into long-short tests like base.
func parseLongShorts(s string, base train.LongShort) ([]train.LongShort, error) {
	var out []train.LongShort
	for _, f := range strings.Split(s, ",") {
		var l, sh int
		if _, err := fmt.Sscanf(strings.TrimSpace(f), "%d/%d", &l, &sh); err != nil || l < 1 || sh < 1 || l+sh > 4096 {
			return nil, fmt.Errorf("-longshort: %q: want long/short flows, 1..4096 in all", f)
		}
		t := base
		t.Long, t.Short = l, sh
		out = append(out, t)
	}
	return out, nil
}

// joinInts formats a flow list for a flag default.
func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// bindRLCCFig4 declares the flags of "smartt-lab rlcc fig4" on fs.
func bindRLCCFig4(progress io.Writer, fs *pflag.FlagSet) cli.RunFunc {
	inc := bindIncast(fs, progress, "4,64,512", 2)
	model := fs.String("model", "", "tree model file (default: the embedded model)")
	targets := fs.String("targets", "0.032,0.064,0.128", "targets (each at the default beta)")
	betas := fs.String("betas", "1.1,1.5,2", "betas (each at the default target)")
	return func(_ []string, out io.Writer) error {
		in, err := inc.parse()
		if err != nil {
			return err
		}
		ts, err := parseList(*targets, "-targets", func(v float64) bool { return v > 0 && v < 16 })
		if err != nil {
			return err
		}
		bs, err := parseList(*betas, "-betas", func(v float64) bool { return v >= 0 && v < 32 })
		if err != nil {
			return err
		}
		base := train.DefaultEnv()
		cfg := base.RLCC
		cfg.Model = *model
		m, err := cfg.LoadModel()
		if err != nil {
			return err
		}
		type setting struct{ t, b float64 }
		var grid []setting
		for _, t := range ts {
			grid = append(grid, setting{t, base.RLCC.Beta})
		}
		for _, b := range bs {
			if b != base.RLCC.Beta {
				grid = append(grid, setting{base.RLCC.Target, b})
			}
		}
		fmt.Fprintf(out, "| target | beta | N | mean RTT inflation (min..max over %d seeds) | Eq. 2 | deviation | goodput | losses per flow |\n|---|---|---|---|---|---|---|---|\n", *inc.seeds)
		for _, g := range grid {
			env := base
			env.RLCC.Target, env.RLCC.Beta = g.t, g.b
			rows, err := train.Fig3(env, []train.Policy{&train.TreePolicy{Model: m, Cfg: env.RLCC}}, in, *inc.seeds, 10_000_000, 10_000_000, inc.progress())
			if err != nil {
				return err
			}
			for _, r := range rows {
				fmt.Fprintf(out, "| %g | %g | %d | %.3f (%.3f..%.3f) | %.3f | %+.1f %% | %.3f | %.2f |\n", g.t, g.b, r.Flows,
					r.Inflation.Mean, r.Inflation.Min, r.Inflation.Max, r.Eq2, 100*(r.Inflation.Mean/r.Eq2-1), r.Goodput.Mean, r.Losses.Mean)
			}
		}
		return nil
	}
}

// incastFlags are the flags the incast experiments (fig3, fig4, compare) share.
type incastFlags struct {
	quiet    *bool
	flows    *string
	seeds    *int
	progress func() io.Writer // nil under -quiet
}

// bindIncast declares -quiet, -flows and -seeds on fs with the given defaults.
func bindIncast(fs *pflag.FlagSet, progress io.Writer, flows string, seeds int) *incastFlags {
	f := &incastFlags{
		quiet: fs.BoolP("quiet", "q", false, "no progress lines"),
		flows: fs.String("flows", flows, "incast sizes"),
		seeds: fs.Int("seeds", seeds, "seeds per point (the spread is min..max)"),
	}
	f.progress = func() io.Writer {
		if *f.quiet {
			return nil
		}
		return progress
	}
	return f
}

// parse returns the incast sizes, having checked -flows and -seeds.
func (f *incastFlags) parse() ([]int, error) {
	ns, err := parseFlows(*f.flows)
	if err == nil {
		err = checkSeeds(*f.seeds)
	}
	return ns, err
}

// parseFlows reads a comma-separated list of incast sizes, each in 1..4096.
func parseFlows(s string) ([]int, error) {
	vs, err := parseList(s, "-flows", func(v float64) bool { return v >= 1 && v <= 4096 && v == float64(int(v)) })
	ns := make([]int, len(vs))
	for i, v := range vs {
		ns[i] = int(v)
	}
	return ns, err
}

// parseCCs reads a comma-separated list of registered congestion controllers.
func parseCCs(s string) ([]string, error) {
	var names []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if _, ok := transport.LookupCC(name); !ok {
			return nil, fmt.Errorf("-ccs: %q is not a registered controller (%s)", name, strings.Join(transport.CCNames(), ", "))
		}
		names = append(names, name)
	}
	return names, nil
}

// checkSeeds checks a -seeds value.
func checkSeeds(n int) error {
	if n < 1 || n > 100 {
		return fmt.Errorf("-seeds = %d: must be in 1..100", n)
	}
	return nil
}

// parseList reads comma-separated numbers, each checked by ok.
func parseList(s, flag string, ok func(float64) bool) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !ok(v) {
			return nil, fmt.Errorf("%s: %q is out of range", flag, f)
		}
		out = append(out, v)
	}
	return out, nil
}

func meanReward(eps []train.Episode) float64 {
	s := 0.0
	for _, e := range eps {
		s += e.Reward / float64(len(eps))
	}
	return s
}

// loadPolicy reads a policy network file (empty: the embedded default).
func loadPolicy(path string) (*rlccnet.MLP, []byte, error) {
	b := rlccnet.DefaultPolicyJSON()
	if path != "" {
		var err error
		if b, err = os.ReadFile(path); err != nil {
			return nil, nil, err
		}
	}
	m, _, err := rlccnet.ParseMLP(b)
	return m, b, err
}

// printTable prints t and whether its columns are ordered as Table VI's, within tol (the
// fit error of an approximation; 0: strictly).
func printTable(w io.Writer, name string, t [3][3]float64, tol float64) {
	fmt.Fprintf(w, "%s:\n| previous \\ current | under-utilised | on target | congested |\n|---|---|---|---|\n", name)
	for i, row := range []string{"under-utilised", "on target", "congested"} {
		fmt.Fprintf(w, "| %s | %.3f | %.3f | %.3f |\n", row, t[i][0], t[i][1], t[i][2])
	}
	ok := rlcc.ColumnOrderWithin(t, tol)
	within := ""
	if tol > 0 {
		within = fmt.Sprintf(", steps within the fit error %.2f", tol)
	}
	fmt.Fprintf(w, "increasing down the columns (as Table VI%s): %v %v %v\n\n", within, ok[0], ok[1], ok[2])
}

// bindRLCCLSTM declares the flags of "smartt-lab rlcc lstm": train the paper's LSTM
// teacher, distil it, and compare teacher and trees (docs/rlcc.md, Table I).
func bindRLCCLSTM(progress io.Writer, fs *pflag.FlagSet) cli.RunFunc {
	c := train.DefaultLSTMConfig()
	bindEpisodes(fs, &c.Seed, "seed of the initial weights and of every episode", &c.MinFlows, &c.MaxFlows, &c.EpisodeNs)
	fs.IntVar(&c.Iterations, "iterations", c.Iterations, "training episodes")
	fs.Float64Var(&c.LR, "lr", c.LR, "Adam step size")
	fs.IntVar(&c.Rollout, "rollout", c.Rollout, "transitions per gradient step")
	fs.IntVar(&c.Horizon, "horizon", c.Horizon, "decisions whose delta credit an action")
	fs.Float64Var(&c.WeightClip, "weight-clip", c.WeightClip, "delta/target is clipped to [-weight-clip, 1]")
	fs.IntVar(&c.BPTT, "bptt", c.BPTT, "decisions the gradient runs back through")
	fs.IntVar(&c.AllToAllEvery, "a2a-every", c.AllToAllEvery, "every n-th episode an all-to-all on the 64-host tree (0: incasts only)")
	fs.IntVar(&c.MaxAllToAll, "max-a2a", c.MaxAllToAll, "largest all-to-all: flows per host")
	dc := train.DefaultDistillConfig()
	fs.IntVar(&dc.Episodes, "distill-episodes", dc.Episodes, "recording episodes of the distillation")
	inc := bindIncast(fs, progress, "4,16,64,256", 2)
	warm, measure := int64(5_000_000), int64(5_000_000)
	fs.Var(durFlag{&warm}, "warm", "warm-up before measuring (comparison)")
	fs.Var(durFlag{&measure}, "measure", "measured window (comparison)")
	dir := fs.String("out", "", "directory for lstm.json, model.json, curve.csv, curve.png (default: none)")
	return func(_ []string, out io.Writer) error {
		ns, err := inc.parse()
		if err != nil {
			return err
		}
		dc.MaxFlows, dc.EpisodeNs = c.MaxFlows, c.EpisodeNs // record where the LSTM was trained, both teachers alike
		if p := inc.progress(); p != nil {
			c.Progress, dc.Progress = p, p
		}
		t, err := train.NewLSTMTrainer(c)
		if err != nil {
			return err
		}
		if err := t.Run(); err != nil {
			return err
		}
		lj, err := lstm.Marshal(t.Net, t.Meta())
		if err != nil {
			return err
		}
		lm, lrep, err := train.DistillLSTM(t.Net, lj, dc)
		if err != nil {
			return err
		}
		net, pj, err := loadPolicy("")
		if err != nil {
			return err
		}
		_, mrep, err := train.Distill(net, pj, dc)
		if err != nil {
			return err
		}
		if *dir != "" {
			if err := writeLSTMOutputs(*dir, t, lj, lm); err != nil {
				return err
			}
		}
		printLSTMTraining(out, c, t.Curve)
		if err := printLSTMCost(out, lm); err != nil {
			return err
		}
		printLSTMDistill(out, lrep, mrep)
		cfg := c.Env.RLCC
		pols := []train.Policy{&train.LSTMPolicy{Net: t.Net, Cfg: c.Env}, &train.TreePolicy{Model: lm, Cfg: cfg}}
		rows, err := train.Fig3(c.Env, pols, ns, *inc.seeds, warm, measure, inc.progress())
		if err != nil {
			return err
		}
		printLSTMCompare(out, rows, *inc.seeds, warm, measure)
		return nil
	}
}

// writeLSTMOutputs writes the trained LSTM, its distilled trees and the learning curve.
func writeLSTMOutputs(dir string, t *train.LSTMTrainer, lj []byte, lm *rlcc.Model) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mb, err := lm.Marshal()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "lstm.json"), lj, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "model.json"), mb, 0o644); err != nil {
		return err
	}
	if err := train.WriteCurveCSV(filepath.Join(dir, "curve.csv"), t.Curve); err != nil {
		return err
	}
	return train.PlotCurve(filepath.Join(dir, "curve.png"), t.Curve)
}

// printLSTMTraining prints the mean reward per block of episodes, incasts and
// all-to-alls apart.
func printLSTMTraining(out io.Writer, c train.LSTMConfig, curve []train.Episode) {
	a2a := "no all-to-all episodes"
	if c.AllToAllEvery > 0 {
		a2a = fmt.Sprintf("every %d-th episode an all-to-all of %d..%d flows on the 64-host tree", c.AllToAllEvery, 2*train.PaperTree.Hosts, train.PaperTree.Hosts*c.MaxAllToAll)
	}
	fmt.Fprintf(out, "Training: seed %d, %d episodes of %g ms, incasts of %d..%d flows (%s), Adam step %g, truncated BPTT over %d decisions.\n\n",
		c.Seed, len(curve), float64(c.EpisodeNs)/1e6, c.MinFlows, c.MaxFlows, a2a, c.LR, c.BPTT)
	fmt.Fprint(out, "| episodes | decisions | incasts: mean reward, second half | all-to-alls: mean reward, second half | goodput, incasts |\n|---|---|---|---|---|\n")
	const blk = 50
	for lo := 0; lo < len(curve); lo += blk {
		b := curve[lo:min(lo+blk, len(curve))]
		var d, ni, na int
		var ri, ra, g float64
		for _, e := range b {
			d += e.Decisions
			if e.AllToAll {
				ra += e.Steady
				na++
			} else {
				ri += e.Steady
				g += e.Goodput
				ni++
			}
		}
		avg := func(s float64, n int) string {
			if n == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f", s/float64(n))
		}
		fmt.Fprintf(out, "| %d-%d | %d | %s | %s | %s |\n", b[0].Iter, b[len(b)-1].Iter, d, avg(ri, ni), avg(ra, na), avg(g, ni))
	}
}

// printLSTMCost prints the operation counts of the LSTM and of its distilled trees.
func printLSTMCost(out io.Writer, lm *rlcc.Model) error {
	p, err := rlcc.NewParamsWithModel(rlcc.DefaultConfig(), config.Network{LinkRate: 100e9, BaseRTT: 10_000, MTU: 4096}, lm)
	if err != nil {
		return err
	}
	lc := lstm.LSTMCount()
	fmt.Fprintf(out, "\nOperations per decision: LSTM %d multiply-adds, %d floating-point operations (paper: 2,600 FLOPS); its distilled trees (%d x depth %d) %d integer operations: x%.1f fewer than the LSTM's flops, x%.1f fewer than its multiply-adds. Decision time: rlcc-table1.\n",
		lc.MACs, lc.Flops(), len(lm.Trees), rlcc.DefaultFit.Depth, p.DecisionOps(), float64(lc.Flops())/float64(p.DecisionOps()), float64(lc.MACs)/float64(p.DecisionOps()))
	return nil
}

// printLSTMDistill prints the distillation's fit for the LSTM and, the same recording and
// fit, for the MLP.
func printLSTMDistill(out io.Writer, l, m train.DistillReport) {
	fmt.Fprint(out, "\nDistillation (the same recording episodes and fit for both teachers), multiplier units:\n\n")
	fmt.Fprint(out, "| teacher | training samples | held-out samples | training RMSE | held-out RMSE | held-out max error | teacher's mean abs(a - 1), held out |\n|---|---|---|---|---|---|---|\n")
	for _, r := range []struct {
		name string
		r    train.DistillReport
	}{{"LSTM", l}, {"MLP (embedded policy)", m}} {
		fmt.Fprintf(out, "| %s | %d | %d | %.4f | %.4f | %.3f | %.3f |\n", r.name, r.r.Train, r.r.Test, r.r.TrainRMSE, r.r.TestRMSE, r.r.TestMaxAbs, r.r.TestMeanAbsInput)
	}
}

// printLSTMCompare prints the LSTM and its trees in closed loop, and the trees' change.
func printLSTMCompare(out io.Writer, rows []train.Fig3Row, seeds int, warm, measure int64) {
	fmt.Fprintf(out, "\nClosed loop (incasts of the training environment, %g ms warm-up, %g ms measured, %d seeds, min..max):\n\n", float64(warm)/1e6, float64(measure)/1e6, seeds)
	fmt.Fprint(out, "| N | policy | mean RTT inflation | Eq. 2 | goodput | losses per flow | trees against the LSTM: inflation, goodput |\n|---|---|---|---|---|---|---|\n")
	for i, r := range rows {
		diff := ""
		if r.Policy == "trees" && i > 0 && rows[i-1].Flows == r.Flows {
			p := rows[i-1]
			diff = fmt.Sprintf("%+.1f %%, %+.1f %%", 100*(r.Inflation.Mean/p.Inflation.Mean-1), 100*(r.Goodput.Mean/p.Goodput.Mean-1))
		}
		fmt.Fprintf(out, "| %d | %s | %.3f (%.3f..%.3f) | %.3f | %.3f (%.3f..%.3f) | %.2f | %s |\n", r.Flows, r.Policy,
			r.Inflation.Mean, r.Inflation.Min, r.Inflation.Max, r.Eq2, r.Goodput.Mean, r.Goodput.Min, r.Goodput.Max, r.Losses.Mean, diff)
	}
}

// bindRLCCFig8 declares the flags of "smartt-lab rlcc fig8": the all-to-all on the
// 64-host tree as a time series per controller (the paper's Fig. 8).
func bindRLCCFig8(progress io.Writer, fs *pflag.FlagSet) cli.RunFunc {
	quiet := fs.BoolP("quiet", "q", false, "no progress lines")
	ccs := fs.String("ccs", "rlcc,dcqcn,swift", "registered congestion controllers")
	flows := fs.Int("flows", 1024, "all-to-all flows (a multiple of 64, at most 4,032)")
	seed := fs.Uint64("seed", 1, "simulator seed")
	end, bin, every, warm := int64(6_000_000), int64(100_000), int64(500_000), int64(1_000_000)
	fs.Var(durFlag{&end}, "end", "simulated time")
	fs.Var(durFlag{&bin}, "bin", "interval of the series (CSV and plots)")
	fs.Var(durFlag{&every}, "print", "interval of the printed table (a multiple of -bin)")
	fs.Var(durFlag{&warm}, "bring-up", "the bring-up: losses before and after it are counted apart")
	dir := fs.String("out", "", "directory for fig8.csv and fig8_{goodput,rtt,loss}.png (default: none)")
	return func(_ []string, out io.Writer) error {
		cs, err := parseCCs(*ccs)
		if err != nil {
			return err
		}
		if bin < 1_000 || every < bin || every%bin != 0 || warm < 0 || warm >= end || end > 1_000_000_000 || end/bin > 100_000 {
			return fmt.Errorf("-bin %v, -print %v, -bring-up %v, -end %v: want 1us <= bin, print a multiple of bin, bring-up < end <= 1s, at most 100,000 bins",
				config.Duration(bin), config.Duration(every), config.Duration(warm), config.Duration(end))
		}
		var p io.Writer
		if !*quiet {
			p = progress
		}
		env, t := train.DefaultEnv(), train.PaperTree
		runs, err := train.Fig8(env, t, cs, *flows, *seed, warm, end, bin, p)
		if err != nil {
			return err
		}
		capacity := float64(env.LinkRate) * float64(t.Hosts)
		printFig8(out, runs, *flows, *seed, end, bin, every, warm, capacity)
		if *dir == "" {
			return nil
		}
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			return err
		}
		if err := train.WriteFig8CSV(filepath.Join(*dir, "fig8.csv"), runs, capacity); err != nil {
			return err
		}
		return train.PlotFig8(filepath.Join(*dir, "fig8"), runs, capacity)
	}
}

// printFig8 prints the series at every-ns rows and the bring-up claim per controller.
func printFig8(out io.Writer, runs []train.Fig8Run, flows int, seed uint64, end, bin, every, warm int64, capacity float64) {
	ms := func(ns int64) string { return fmt.Sprintf("%g", float64(ns)/1e3) }
	fmt.Fprintf(out, "All-to-all of %d flows on the 64-host tree (every host to the next %d), seed %d, %g ms; per %s us: goodput over the senders' line rate, mean RTT (us), packets judged lost.\n\n",
		flows, flows/train.PaperTree.Hosts, seed, float64(end)/1e6, ms(every))
	var hdr, sep strings.Builder
	hdr.WriteString("| from (us) |")
	sep.WriteString("|---|")
	for _, r := range runs {
		fmt.Fprintf(&hdr, " %s goodput | RTT | lost |", r.CC)
		sep.WriteString("---|---|---|")
	}
	fmt.Fprintf(out, "%s\n%s\n", hdr.String(), sep.String())
	step := int(every / bin)
	for k := 0; int64(k)*bin < end; k += step {
		fmt.Fprintf(out, "| %s |", ms(int64(k)*bin))
		for _, r := range runs {
			s := r.Series
			fmt.Fprintf(out, " %.3f | %.1f | %d |", s.Goodput(k, k+step, capacity), s.RTTus(k, k+step), s.Lost(k, k+step))
		}
		fmt.Fprintln(out)
	}
	wb, nb := int(warm/bin), int(end/bin)
	fmt.Fprintf(out, "\nThe paper's claim (Fig. 8): RL-CC and Swift lose packets only in the bring-up, DCQCN throughout. Bring-up here: the first %s us.\n\n", ms(warm))
	fmt.Fprint(out, "| cc | lost in the bring-up | lost after it | per flow after it | last loss ends at (us) | goodput after the bring-up | losses only in the bring-up |\n|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		s := r.Series
		after := s.Lost(wb, nb)
		only := "yes"
		if after > 0 {
			only = "**no**"
		}
		fmt.Fprintf(out, "| %s | %d | %d | %.2f | %s | %.3f | %s |\n", r.CC, s.Lost(0, wb), after, float64(after)/float64(flows), ms(s.LastLoss()), s.Goodput(wb, nb, capacity), only)
	}
}
