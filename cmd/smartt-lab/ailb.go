package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cmd/internal/cli"

	"github.com/smartt-transport/smartt/test/sim"
	"github.com/smartt-transport/smartt/test/sweep"
)

const ailbLong = `The AI-training load-balancing study (docs/results/ai-lb.md): runs every scenario with
every variant at every value of the -x axis, -seeds times each, and prints per scenario
two markdown tables, rows the -x values and columns the variants: the collective
completion time over its ideal (median, min..max over seeds) and the loss rate (trims and
drops per data packet sent, retransmissions included). With -out it draws each as a PNG
(median with min..max error bars against -x, one line per variant).

A variant is a built-in name or NAME=FIELD=VALUE;FIELD=VALUE... (any scenario field by
its YAML path, as in "smartt-lab sim sweep -set"). Built in:
  load balancing: ecmp (one path per flow), ops (host spraying, a random EV per packet),
    reps (host spraying, REPS), switch_spray, switch_rr, switch_adaptive (switches
    spray at random, round robin, or to the least-loaded up port; hosts on one EV)
  loss recovery: sack (trimming, the receiver NACKs; SACK and RTO otherwise), rts
    (return-to-sender trimming), drop (no trimming: drop-tail, SACK and RTO)
Recovery modes the engine gains later are variants too, e.g.
  -variants sack,rts,drop,dupack=transport.recovery=dupack
`

// ailbVariants are the built-in variants: the fields each sets.
var ailbVariants = map[string][]sweep.Axis{
	"ecmp":                   {{Field: "transport.lb", Values: []string{"ecmp"}}, {Field: "topology.routing", Values: []string{"ecmp"}}},
	"ops":                    {{Field: "transport.lb", Values: []string{"ops"}}, {Field: "topology.routing", Values: []string{"ecmp"}}},
	"reps":                   {{Field: "transport.lb", Values: []string{"reps"}}, {Field: "topology.routing", Values: []string{"ecmp"}}},
	"switch_spray":           {{Field: "transport.lb", Values: []string{"ecmp"}}, {Field: "topology.routing", Values: []string{"spray"}}},
	"switch_rr":              {{Field: "transport.lb", Values: []string{"ecmp"}}, {Field: "topology.routing", Values: []string{"round_robin"}}},
	"switch_adaptive":        {{Field: "transport.lb", Values: []string{"ecmp"}}, {Field: "topology.routing", Values: []string{"adaptive"}}},
	"switch_adaptive_random": {{Field: "transport.lb", Values: []string{"ecmp"}}, {Field: "topology.routing", Values: []string{"adaptive_random"}}},
	"sack":                   {{Field: "topology.queue.trim", Values: []string{"true"}}, {Field: "topology.queue.return_to_sender", Values: []string{"false"}}},
	"rts":                    {{Field: "topology.queue.trim", Values: []string{"true"}}, {Field: "topology.queue.return_to_sender", Values: []string{"true"}}},
	"drop":                   {{Field: "topology.queue.trim", Values: []string{"false"}}, {Field: "topology.queue.return_to_sender", Values: []string{"false"}}},
}

// ailbVariant is one column: a name and the fields it sets.
type ailbVariant struct {
	name string
	sets []sweep.Axis
}

// parseAILBVariant reads a built-in name or NAME=FIELD=VALUE;FIELD=VALUE.
func parseAILBVariant(s string) (ailbVariant, error) {
	name, def, custom := strings.Cut(s, "=")
	if !custom {
		sets, ok := ailbVariants[s]
		if !ok {
			known := make([]string, 0, len(ailbVariants))
			for k := range ailbVariants {
				known = append(known, k)
			}
			slices.Sort(known)
			return ailbVariant{}, fmt.Errorf("variant %q: not built in (%s); define one as NAME=FIELD=VALUE;FIELD=VALUE", s, strings.Join(known, ", "))
		}
		return ailbVariant{name, sets}, nil
	}
	v := ailbVariant{name: name}
	for _, kv := range strings.Split(def, ";") {
		a, err := sweep.ParseAxis(kv)
		if err != nil {
			return ailbVariant{}, fmt.Errorf("variant %q: %w", name, err)
		}
		if len(a.Values) != 1 {
			return ailbVariant{}, fmt.Errorf("variant %q: %s: one value per field", name, kv)
		}
		v.sets = append(v.sets, a)
	}
	if name == "" || len(v.sets) == 0 {
		return ailbVariant{}, fmt.Errorf("variant %q: want NAME=FIELD=VALUE;...", s)
	}
	return v, nil
}

// ailbCell is what one run contributes.
type ailbCell struct {
	rel, loss, signal float64
	unfinished        bool
}

// bindAILB declares the flags of "smartt-lab sim ailb" on fs.
func bindAILB(stderr io.Writer, fs *pflag.FlagSet) cli.RunFunc {
	scen := fs.String("scenarios", "ai_permutation_128", "scenarios (files or shipped names), comma-separated")
	vars := fs.String("variants", "ecmp,ops,reps,switch_spray,switch_adaptive", "variants (columns), comma-separated")
	xs := fs.StringP("x", "x", "transport.fixed_rate.coefficient=0.5,0.7,0.8,0.9,1", "the rows: FIELD=X1,X2,... (empty: one row)")
	var sets setFlags
	fs.Var(&sets, "set", "FIELD=VALUE applied to every run (repeatable)")
	seeds := fs.Int("seeds", 3, "runs per cell, seeds s, s+1, ...")
	jobs := fs.IntP("jobs", "j", runtime.GOMAXPROCS(0), "runs at once")
	out := fs.String("out", "", "directory for the PNG figures (empty: none)")
	prefix := fs.String("prefix", "", "file-name prefix of the figures")
	signal := fs.Bool("signal", false, "also print the mean loss-signal delay (NACK or returned header reaching the sender), us")
	progress := fs.Bool("progress", true, "report each finished run on stderr")
	return func(_ []string, stdout io.Writer) error {
		if *seeds < 1 || *seeds > 100 {
			return fmt.Errorf("-seeds %d: must be in 1..100", *seeds)
		}
		var variants []ailbVariant
		for _, s := range strings.Split(*vars, ",") {
			v, err := parseAILBVariant(strings.TrimSpace(s))
			if err != nil {
				return err
			}
			variants = append(variants, v)
		}
		var xAxis *sweep.Axis
		if *xs != "" {
			a, err := sweep.ParseAxis(*xs)
			if err != nil {
				return fmt.Errorf("-x: %w", err)
			}
			xAxis = &a
		}
		for _, a := range sets {
			if len(a.Values) != 1 {
				return fmt.Errorf("-set %s: one value (use -x for the rows)", a)
			}
		}
		scenarios := strings.Split(*scen, ",")
		// One sweep spec per (scenario, variant): the variant's fields and -set as one-value
		// axes, then the rows.
		type job struct {
			spec       *sweep.Spec
			k, si, vi  int
			xi, seedIx int
		}
		var todo []job
		nx := 1
		if xAxis != nil {
			nx = len(xAxis.Values)
		}
		for si, ref := range scenarios {
			src, err := sweep.LoadScenario(ref)
			if err != nil {
				return err
			}
			for vi, v := range variants {
				axes := append(slices.Clone(v.sets), sets...)
				if xAxis != nil {
					axes = append(axes, *xAxis)
				}
				spec, err := sweep.New(ref, src, axes, *seeds)
				if err != nil {
					return fmt.Errorf("%s, variant %s: %w", ref, v.name, err)
				}
				// Check every point before running any (a bad value fails at once).
				for p := range spec.Points() {
					if _, _, err := spec.Job(p * *seeds); err != nil {
						return fmt.Errorf("%s, variant %s: %w", ref, v.name, err)
					}
				}
				for k := range spec.Jobs() {
					p := k / *seeds
					todo = append(todo, job{spec: spec, k: k, si: si, vi: vi, xi: p % nx, seedIx: k % *seeds})
				}
			}
		}
		cells := make([][][][]ailbCell, len(scenarios)) // scenario, x, variant, seed
		for si := range cells {
			cells[si] = make([][][]ailbCell, nx)
			for xi := range cells[si] {
				cells[si][xi] = make([][]ailbCell, len(variants))
				for vi := range variants {
					cells[si][xi][vi] = make([]ailbCell, *seeds)
				}
			}
		}
		if *progress {
			fmt.Fprintf(stderr, "ailb: %d scenarios x %d variants x %d rows x %d seeds = %d runs, %d at once\n",
				len(scenarios), len(variants), nx, *seeds, len(todo), *jobs)
		}
		var mu sync.Mutex
		var first error
		done := 0
		t0 := time.Now()
		next := make(chan job)
		var wg sync.WaitGroup
		for range max(1, *jobs) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range next {
					_, sc, err := j.spec.Job(j.k)
					var res *sim.Result
					if err == nil {
						res, err = sweep.SimRunner(sc)
					}
					mu.Lock()
					if err != nil {
						if first == nil {
							first = fmt.Errorf("%s, %s, job %d: %w", scenarios[j.si], variants[j.vi].name, j.k, err)
						}
						mu.Unlock()
						continue
					}
					c := ailbCell{rel: res.Ratio, unfinished: res.Completed+res.Failed < res.Flows || res.Failed > 0,
						signal: math.NaN()}
					if res.LossSignals > 0 {
						c.signal = res.LossSignalDelay / 1e3
					}
					if sent := res.DataSent + res.RetxSack + res.RetxNack + res.RetxTimeout; sent > 0 {
						c.loss = float64(res.Trims+res.Drops) / float64(sent)
					}
					if c.unfinished {
						c.rel = math.NaN()
					}
					cells[j.si][j.xi][j.vi][j.seedIx] = c
					done++
					if *progress {
						fmt.Fprintf(stderr, "[%d/%d] %s %s %s seed %d: completion_rel %.3f, loss %.2f %% (%.0f s)\n", done, len(todo),
							scenarios[j.si], variants[j.vi].name, xLabel(xAxis, j.xi), sc.Seed, c.rel, 100*c.loss, time.Since(t0).Seconds())
					}
					mu.Unlock()
				}
			}()
		}
		for _, j := range todo {
			mu.Lock()
			stop := first != nil
			mu.Unlock()
			if stop {
				break
			}
			next <- j
		}
		close(next)
		wg.Wait()
		if first != nil {
			return first
		}
		var names []string
		for _, v := range variants {
			names = append(names, v.name)
		}
		rowName := "-"
		if xAxis != nil {
			rowName = xAxis.Field
		}
		for si, ref := range scenarios {
			base := strings.TrimSuffix(filepath.Base(ref), ".yaml")
			metrics := []struct {
				key, title string
				get        func(ailbCell) float64
				fmt        func(float64) string
			}{
				{"cct", "collective completion time / ideal", func(c ailbCell) float64 { return c.rel }, func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }},
				{"loss", "loss rate, % (trims + drops per data packet sent)", func(c ailbCell) float64 { return 100 * c.loss }, func(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }},
			}
			if *signal {
				metrics = append(metrics, struct {
					key, title string
					get        func(ailbCell) float64
					fmt        func(float64) string
				}{"signal", "mean loss-signal delay, us (lost transmission to NACK or returned header at the sender)", func(c ailbCell) float64 { return c.signal }, func(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }})
			}
			for _, m := range metrics {
				fmt.Fprintf(stdout, "%s: %s, median (min..max) over %d seeds:\n\n", base, m.title, *seeds)
				fmt.Fprintf(stdout, "| %s | %s |\n|---|%s\n", rowName, strings.Join(names, " | "), strings.Repeat("---|", len(names)))
				med := make([][]float64, len(variants))
				lo := make([][]float64, len(variants))
				hi := make([][]float64, len(variants))
				for xi := range nx {
					row := []string{xLabel(xAxis, xi)}
					for vi := range variants {
						var v []float64
						unfinished := 0
						for _, c := range cells[si][xi][vi] {
							if c.unfinished {
								unfinished++
							}
							if x := m.get(c); !math.IsNaN(x) {
								v = append(v, x)
							}
						}
						cell := "-"
						md, l, h := math.NaN(), math.NaN(), math.NaN()
						if len(v) > 0 {
							slices.Sort(v)
							md, l, h = median(v), v[0], v[len(v)-1]
							cell = fmt.Sprintf("%s (%s..%s)", m.fmt(md), m.fmt(l), m.fmt(h))
						}
						if unfinished > 0 {
							cell += fmt.Sprintf(" [%d unfinished]", unfinished)
						}
						row = append(row, cell)
						med[vi], lo[vi], hi[vi] = append(med[vi], md), append(lo[vi], l), append(hi[vi], h)
					}
					fmt.Fprintf(stdout, "| %s |\n", strings.Join(row, " | "))
				}
				fmt.Fprintln(stdout)
				if *out != "" && xAxis != nil {
					if err := os.MkdirAll(*out, 0o755); err != nil {
						return err
					}
					path := filepath.Join(*out, *prefix+base+"_"+m.key+".png")
					if err := plotAILB(path, fmt.Sprintf("%s: %s", base, m.title), xAxis, names, med, lo, hi, *seeds); err != nil {
						return fmt.Errorf("plot: %w", err)
					}
				}
			}
		}
		return nil
	}
}

func xLabel(a *sweep.Axis, i int) string {
	if a == nil {
		return "all"
	}
	return a.Values[i]
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// plotAILB draws one line per variant: the median against the x axis, min..max as
// error bars (a non-numeric axis is drawn as categories).
func plotAILB(path, title string, x *sweep.Axis, names []string, med, lo, hi [][]float64, seeds int) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s (median, min..max over %d seeds)", title, seeds)
	p.X.Label.Text = x.Field
	p.Legend.Top = true
	xv := make([]float64, len(x.Values))
	numeric := true
	for i, s := range x.Values {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			numeric = false
		}
		xv[i] = f
	}
	if !numeric {
		for i := range xv {
			xv[i] = float64(i)
		}
		p.NominalX(x.Values...)
	}
	ymin, ymax := math.Inf(1), math.Inf(-1)
	for vi, name := range names {
		var pts errPts
		for xi := range xv {
			if math.IsNaN(med[vi][xi]) {
				continue
			}
			xx := xv[xi]
			if !numeric {
				xx += (float64(vi) - float64(len(names)-1)/2) * 0.6 / float64(len(names))
			}
			pts.XYs = append(pts.XYs, plotter.XY{X: xx, Y: med[vi][xi]})
			pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{med[vi][xi] - lo[vi][xi], hi[vi][xi] - med[vi][xi]})
			ymin, ymax = min(ymin, lo[vi][xi]), max(ymax, hi[vi][xi])
		}
		if len(pts.XYs) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(&pts)
		if err != nil {
			return err
		}
		c := plotutil.Color(vi)
		l.Color, sc.Color, sc.Shape = c, c, plotutil.Shape(vi)
		if !numeric {
			l.LineStyle.Width = 0
		}
		eb, err := plotter.NewYErrorBars(&pts)
		if err != nil {
			return err
		}
		eb.Color, eb.CapWidth = c, vg.Points(5)
		p.Add(l, sc, eb)
		p.Legend.Add(name, l, sc)
	}
	p.Add(plotter.NewGrid())
	if span := ymax - ymin; span > 0 && !math.IsInf(span, 0) {
		p.Y.Min = max(0, ymin-0.05*span)
		p.Y.Max = ymax + 0.1*span + 0.07*float64(len(names)+1)*span
	}
	if !numeric {
		p.X.Min, p.X.Max = -0.5, float64(len(xv))-0.5
	}
	p.Legend.ThumbnailWidth = vg.Points(20)
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

// errPts are a series' medians with their spread.
type errPts struct {
	plotter.XYs
	plotter.YErrors
}
