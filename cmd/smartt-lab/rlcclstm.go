package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cc/rlcc"
	"github.com/smartt-transport/smartt/cc/rlcc/lstm"
	"github.com/smartt-transport/smartt/cc/rlcc/train"
	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/config"
)

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
