package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cc/rlcc/train"
	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/config"
)

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
