package train

import (
	"fmt"
	"io"
	"strings"
)

// TablesConfig is the set-up of the paper's comparison tests (Figs. 6-7, Tables IV-V)
// as this simulator runs them.
type TablesConfig struct {
	CCs           []string    // registered controllers: rlcc (the embedded trees), dcqcn, swift
	Seeds         int         // seeds 1..Seeds per cell (spread min..max)
	Warm, Measure int64       // ns: bring-up, then the measured window
	ManyToOne     []int       // many-to-one on the one-switch environment (each flow its own host)
	TreeManyToOne []int       // many-to-one on Tree (at most Hosts-1 flows)
	AllToAll      []int       // all-to-all on Tree (multiples of Hosts)
	LongShort     []LongShort // the long-short tests
	Tree          Tree
	Progress      io.Writer // one line per run, or nil
}

// DefaultTablesConfig is the paper's flow counts of Table IV where the simulator can run
// them: many-to-one 32..4,096 on one switch, all-to-all 64..2,048 on the 64-host tree,
// long-short 1/50 and 4/100; many-to-one on the tree up to its 63 senders.
func DefaultTablesConfig() TablesConfig {
	ls := LongShort{Long: 1, Short: 50, ShortSize: 64 << 10, Burst: 5_000_000, End: 10_000_000}
	ls4 := ls
	ls4.Long, ls4.Short = 4, 100
	return TablesConfig{CCs: []string{"rlcc", "dcqcn", "swift"}, Seeds: 3, Warm: 5_000_000, Measure: 5_000_000,
		ManyToOne: []int{32, 128, 2048, 4096}, TreeManyToOne: []int{16, 32, 63}, AllToAll: []int{64, 512, 1024, 2048},
		LongShort: []LongShort{ls, ls4}, Tree: PaperTree}
}

// cell is one (test, N, controller) over seeds.
type cell struct {
	goodput, latency, loss, allLoss Spread // loss: per flow in the window; allLoss: whole run
	extra                           bool   // long-short: every short flow done and the long ones recovered
}

// tablesRun holds every cell by test name, N (index) and controller.
type tablesRun struct {
	c     TablesConfig
	cells map[string]map[int]map[string]cell
}

func (t *tablesRun) put(test string, n int, cc string, c cell) {
	if t.cells[test] == nil {
		t.cells[test] = map[int]map[string]cell{}
	}
	if t.cells[test][n] == nil {
		t.cells[test][n] = map[string]cell{}
	}
	t.cells[test][n][cc] = c
}

// RunTables runs every test of c and prints the regions rlcc-fig6, rlcc-fig7,
// rlcc-table4 and rlcc-table5 as "<!-- results:NAME -->" blocks.
func RunTables(env Env, c TablesConfig, out io.Writer) error {
	t := &tablesRun{c: c, cells: map[string]map[int]map[string]cell{}}
	if err := t.runSteady(env); err != nil {
		return err
	}
	if err := t.runLongShort(env); err != nil {
		return err
	}
	t.printFig(out, "rlcc-fig6", "tree-m2o", c.TreeManyToOne, fmt.Sprintf("Many-to-one on the %d-host tree (%d ToRs, %d spines, 8:1 at the ToR)", c.Tree.Hosts, c.Tree.Leaves, c.Tree.Spines),
		"Paper (Fig. 6, 64-host cluster, 4 flow counts): DCQCN slightly higher goodput, RL-CC similar goodput with much lower latency.")
	t.printFig(out, "rlcc-fig7", "a2a", c.AllToAll, fmt.Sprintf("All-to-all on the %d-host tree: every host sends to the next N/%d hosts at once", c.Tree.Hosts, c.Tree.Hosts),
		"Paper (Fig. 7): RL-CC higher goodput and lower latency than DCQCN and Swift in every scenario; (Fig. 8, 8,192 flows) RL-CC and Swift lose packets only in the bring-up, DCQCN throughout.")
	t.printTable4(out)
	t.printTable5(out)
	return nil
}

func (t *tablesRun) progress(format string, a ...any) {
	if t.c.Progress != nil {
		fmt.Fprintf(t.c.Progress, format+"\n", a...)
	}
}

// runSteady runs many-to-one (one switch and tree) and all-to-all for every controller.
func (t *tablesRun) runSteady(env Env) error {
	type test struct {
		name string
		ns   []int
		run  func(pol Policy, n int, seed uint64) (g, lat float64, loss, all uint64, err error)
	}
	tests := []test{
		{"m2o", t.c.ManyToOne, func(pol Policy, n int, seed uint64) (float64, float64, uint64, uint64, error) {
			st, err := env.Run(pol, n, seed, t.c.Warm, t.c.Measure)
			return st.Goodput, st.Inflation * float64(st.BaseRTT) / 1e3, st.Losses, st.AllLosses, err
		}},
	}
	for _, kind := range []struct{ name, kind string }{{"tree-m2o", "many-to-one"}, {"a2a", "all-to-all"}} {
		ns := t.c.TreeManyToOne
		if kind.name == "a2a" {
			ns = t.c.AllToAll
		}
		tests = append(tests, test{kind.name, ns, func(pol Policy, n int, seed uint64) (float64, float64, uint64, uint64, error) {
			st, err := env.RunTree(pol, t.c.Tree, kind.kind, n, seed, t.c.Warm, t.c.Measure)
			return st.Goodput, st.RTTus, st.Losses, st.AllLosses, err
		}})
	}
	for _, ts := range tests {
		for _, n := range ts.ns {
			for _, cc := range t.c.CCs {
				var g, lat, loss, all []float64
				for s := 1; s <= t.c.Seeds; s++ {
					gp, l, ls, al, err := ts.run(&CCPolicy{CC: cc}, n, uint64(s))
					if err != nil {
						return fmt.Errorf("%s N=%d %s: %w", ts.name, n, cc, err)
					}
					t.progress("%-8s %-6s N=%5d seed %d: goodput %.3f latency %.1f us losses %d (whole run %d)", ts.name, cc, n, s, gp, l, ls, al)
					g, lat = append(g, gp), append(lat, l)
					loss, all = append(loss, float64(ls)/float64(n)), append(all, float64(al)/float64(n))
				}
				t.put(ts.name, n, cc, cell{goodput: spread(g), latency: spread(lat), loss: spread(loss), allLoss: spread(all)})
			}
		}
	}
	return nil
}

// runLongShort runs the long-short tests; N indexes the test.
func (t *tablesRun) runLongShort(env Env) error {
	for i, ls := range t.c.LongShort {
		for _, cc := range t.c.CCs {
			var g, loss []float64
			ok := true
			for s := 1; s <= t.c.Seeds; s++ {
				st, err := env.RunLongShort(&CCPolicy{CC: cc}, ls, uint64(s))
				if err != nil {
					return fmt.Errorf("long-short %d/%d %s: %w", ls.Long, ls.Short, cc, err)
				}
				t.progress("ls       %-6s %d/%d seed %d: long after %.3f recover %.0f us, short done %d, losses %d", cc, ls.Long, ls.Short, s, st.LongAfter, st.RecoverUs, st.ShortDone, st.Losses)
				g = append(g, st.LongAfter)
				loss = append(loss, float64(st.Losses)/float64(ls.Long+ls.Short))
				ok = ok && st.ShortDone == ls.Short && st.RecoverUs >= 0
			}
			t.put("ls", i, cc, cell{goodput: spread(g), loss: spread(loss), allLoss: spread(loss), extra: ok})
		}
	}
	return nil
}

func sp(s Spread, f string) string {
	return fmt.Sprintf(f+" ("+f+".."+f+")", s.Mean, s.Min, s.Max)
}

// printFig prints one steady-state test: goodput, latency, losses per flow.
func (t *tablesRun) printFig(out io.Writer, region, test string, ns []int, title, paper string) {
	fmt.Fprintf(out, "<!-- results:%s -->\n%s; %s warm-up, %s measured, %d seeds (min..max).\n\n", region, title,
		ms(t.c.Warm), ms(t.c.Measure), t.c.Seeds)
	fmt.Fprint(out, "| flows | cc | goodput / line rate | mean RTT (us) | losses per flow, measured window | whole run |\n|---|---|---|---|---|---|\n")
	for _, n := range ns {
		for _, cc := range t.c.CCs {
			c := t.cells[test][n][cc]
			fmt.Fprintf(out, "| %d | %s | %s | %s | %s | %s |\n", n, cc, sp(c.goodput, "%.3f"), sp(c.latency, "%.1f"), sp(c.loss, "%.2f"), sp(c.allLoss, "%.2f"))
		}
	}
	fmt.Fprintf(out, "\n%s\n<!-- /results -->\n", paper)
}

func ms(ns int64) string { return fmt.Sprintf("%g ms", float64(ns)/1e6) }

// table4Columns are the paper's Table IV columns and table4Paper its packets lost per
// flow in them, by controller.
var table4Columns = []string{"many-to-one 32", "many-to-one 128", "many-to-one 2048", "many-to-one 4096",
	"all-to-all 64", "all-to-all 512", "all-to-all 1024", "all-to-all 2048", "long-short 1/50", "long-short 4/100"}

var table4Paper = map[string][]float64{
	"dcqcn": {0.0, 886.4, 28.5, 25.7, 225.1, 50.71, 48.1, 26.7, 0.0, 57.9},
	"swift": {0.0, 0.0, 10.1, 9.1, 0.0, 0.0, 0.8, 6.5, 0.0, 0.0},
	"rlcc":  {0.0, 0.0, 0.8, 2.8, 0.0, 0.0, 0.2, 1.2, 0.0, 0.0},
}

// paperLoss returns the paper's Table IV value for a column label, if it has one.
func paperLoss(cc, col string) (float64, bool) {
	for i, c := range table4Columns {
		if c == col {
			if v, ok := table4Paper[cc]; ok {
				return v[i], true
			}
		}
	}
	return 0, false
}

// printTable4 prints the packets lost per flow over the whole test, ours over the
// paper's.
func (t *tablesRun) printTable4(out io.Writer) {
	fmt.Fprint(out, "<!-- results:rlcc-table4 -->\nPackets judged lost per flow over the whole test (bring-up included; long-short: from the burst on, per long and short flow), mean over seeds; the paper's row under ours.\n\n| cc |")
	var cols []string
	for _, n := range t.c.ManyToOne {
		cols = append(cols, fmt.Sprintf("many-to-one %d", n))
	}
	for _, n := range t.c.AllToAll {
		cols = append(cols, fmt.Sprintf("all-to-all %d", n))
	}
	for _, ls := range t.c.LongShort {
		cols = append(cols, fmt.Sprintf("long-short %d/%d", ls.Long, ls.Short))
	}
	fmt.Fprintf(out, " %s |\n|---|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	for _, cc := range t.c.CCs {
		var v []string
		for _, n := range t.c.ManyToOne {
			v = append(v, fmt.Sprintf("%.2f", t.cells["m2o"][n][cc].allLoss.Mean))
		}
		for _, n := range t.c.AllToAll {
			v = append(v, fmt.Sprintf("%.2f", t.cells["a2a"][n][cc].allLoss.Mean))
		}
		for i := range t.c.LongShort {
			v = append(v, fmt.Sprintf("%.2f", t.cells["ls"][i][cc].allLoss.Mean))
		}
		fmt.Fprintf(out, "| %s | %s |\n", cc, strings.Join(v, " | "))
		var pv []string
		for _, col := range cols {
			if x, ok := paperLoss(cc, col); ok {
				pv = append(pv, fmt.Sprintf("%g", x))
			} else {
				pv = append(pv, "-")
			}
		}
		fmt.Fprintf(out, "| %s (paper) | %s |\n", cc, strings.Join(pv, " | "))
	}
	fmt.Fprint(out, "\n| cc | columns where it loses the fewest (ours) | (paper, same columns) |\n|---|---|---|\n")
	for _, cc := range t.c.CCs {
		ours, paper, np := 0, 0, 0
		for j, col := range cols {
			if t.bestLoss(j, cc) {
				ours++
			}
			if v, ok := paperLoss(cc, col); ok {
				np++
				best := true
				for o := range table4Paper {
					if w, _ := paperLoss(o, col); w < v {
						best = false
					}
				}
				if best {
					paper++
				}
			}
		}
		fmt.Fprintf(out, "| %s | %d of %d | %d of %d |\n", cc, ours, len(cols), paper, np)
	}
	fmt.Fprint(out, "<!-- /results -->\n")
}

// column returns the whole-run loss cell of Table IV's column j for cc.
func (t *tablesRun) column(j int, cc string) cell {
	switch {
	case j < len(t.c.ManyToOne):
		return t.cells["m2o"][t.c.ManyToOne[j]][cc]
	case j < len(t.c.ManyToOne)+len(t.c.AllToAll):
		return t.cells["a2a"][t.c.AllToAll[j-len(t.c.ManyToOne)]][cc]
	}
	return t.cells["ls"][j-len(t.c.ManyToOne)-len(t.c.AllToAll)][cc]
}

// bestLoss: cc's loss in column j is the lowest (ties count for all).
func (t *tablesRun) bestLoss(j int, cc string) bool {
	v := t.column(j, cc).allLoss.Mean
	for _, o := range t.c.CCs {
		if t.column(j, o).allLoss.Mean < v-1e-9 {
			return false
		}
	}
	return true
}

// Success thresholds of Table V: after the bring-up a controller loses less than
// successLoss packets per flow in the measured window, and its goodput is at least
// successGoodput of the best controller's in the same test.
const (
	successLoss    = 1.0
	successGoodput = 0.9
)

// success judges cc on one steady-state test over its flow counts; the reason names the
// first failing count.
func (t *tablesRun) success(test string, ns []int, cc string) (bool, string) {
	for _, n := range ns {
		c := t.cells[test][n][cc]
		best := 0.0
		for _, o := range t.c.CCs {
			best = max(best, t.cells[test][n][o].goodput.Mean)
		}
		if c.loss.Max >= successLoss {
			return false, fmt.Sprintf("%.1f losses per flow in the window at %d", c.loss.Max, n)
		}
		if c.goodput.Min < successGoodput*best {
			return false, fmt.Sprintf("goodput %.2f against the best %.2f at %d", c.goodput.Min, best, n)
		}
	}
	return true, ""
}

// printTable5 prints the success matrix computed from the runs above.
func (t *tablesRun) printTable5(out io.Writer) {
	fmt.Fprintf(out, "<!-- results:rlcc-table5 -->\nA controller succeeds in a steady-state test when, at every flow count and seed, it loses fewer than %g packets per flow in the measured window (after the bring-up) and its goodput is at least %g of the best controller's there; in long-short when in every seed every short flow completes and the long flows get back to 90 %% of their rate before the end, and their goodput after the burst is at least %g of the best's. OSU all-to-all (MPI) is not run.\n\n",
		successLoss, successGoodput, successGoodput)
	fmt.Fprint(out, "| cc | many-to-one (one switch) | many-to-one (tree) | all-to-all (tree) | long-short | all |\n|---|---|---|---|---|---|\n")
	mark := func(ok bool, why string) string {
		if ok {
			return "yes"
		}
		return "**no**: " + why
	}
	for _, cc := range t.c.CCs {
		a, wa := t.success("m2o", t.c.ManyToOne, cc)
		b, wb := t.success("tree-m2o", t.c.TreeManyToOne, cc)
		c, wc := t.success("a2a", t.c.AllToAll, cc)
		d, wd := true, ""
		for i, ls := range t.c.LongShort {
			x := t.cells["ls"][i][cc]
			best := 0.0
			for _, o := range t.c.CCs {
				best = max(best, t.cells["ls"][i][o].goodput.Mean)
			}
			if d && !x.extra {
				d, wd = false, fmt.Sprintf("%d/%d: a short flow unfinished or the long flows not recovered", ls.Long, ls.Short)
			} else if d && x.goodput.Min < successGoodput*best {
				d, wd = false, fmt.Sprintf("%d/%d: long goodput %.2f against the best %.2f", ls.Long, ls.Short, x.goodput.Min, best)
			}
		}
		all := "yes"
		if !(a && b && c && d) {
			all = "**no**"
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s |\n", cc, mark(a, wa), mark(b, wb), mark(c, wc), mark(d, wd), all)
	}
	fmt.Fprint(out, "\nPaper (Table V; its marks are images our copy lacks, its text says): RL-CC the only controller that succeeds in all tests; DCQCN fails all-to-all (losses throughout, Fig. 8); Swift performs poorly on OSU all-to-all.\n<!-- /results -->\n")
}
