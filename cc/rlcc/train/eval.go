package train

import (
	"fmt"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/smartt-transport/smartt/cc/rlcc"
	"github.com/smartt-transport/smartt/cc/rlcc/rlccnet"
)

// NetAction is the multiplier the policy network chooses for observation x (clamped as
// the controller clamps it).
func NetAction(m *rlccnet.MLP, cfg rlcc.Config) func(x *[rlcc.NumFeatures]float64) float64 {
	return func(x *[rlcc.NumFeatures]float64) float64 {
		in := rlccnet.NetInput(x)
		return min(max(rlccnet.Multiplier(m.Forward(&in)), cfg.MinAction), cfg.MaxAction)
	}
}

// TreeAction is the multiplier a tree model chooses (float reference evaluation, clamped).
func TreeAction(m *rlcc.Model, cfg rlcc.Config) func(x *[rlcc.NumFeatures]float64) float64 {
	return func(x *[rlcc.NumFeatures]float64) float64 {
		return min(max(m.PredictFloat(x), cfg.MinAction), cfg.MaxAction)
	}
}

// Eq2 is the paper's expected RTT inflation at N flows with rates normalised to line
// rate: target * sqrt(N) + beta.
func Eq2(cfg rlcc.Config, n int) float64 { return cfg.Target*math.Sqrt(float64(n)) + cfg.Beta }

// Spread is a mean with the smallest and largest value over seeds.
type Spread struct{ Mean, Min, Max float64 }

func spread(v []float64) Spread {
	s := Spread{Min: math.Inf(1), Max: math.Inf(-1)}
	for _, x := range v {
		s.Mean += x / float64(len(v))
		s.Min = min(s.Min, x)
		s.Max = max(s.Max, x)
	}
	return s
}

// Fig3Row is one (policy, N) cell of the Fig. 3 comparison over seeds.
type Fig3Row struct {
	Policy    string
	Flows     int
	Inflation Spread
	Eq2       float64
	Goodput   Spread
	Losses    Spread // packets judged lost in the window, per flow
	Trims     Spread // switch trims over the whole run (start-up included)
}

// Fig3 runs every policy on incasts of each N for seeds 1..seeds, warm then measure ns.
func Fig3(env Env, pols []Policy, flows []int, seeds int, warm, measure int64, progress io.Writer) ([]Fig3Row, error) {
	var rows []Fig3Row
	for _, n := range flows {
		for _, pol := range pols {
			var infl, gp, loss, trims []float64
			for s := 1; s <= seeds; s++ {
				st, err := env.Run(pol, n, uint64(s), warm, measure)
				if err != nil {
					return nil, err
				}
				if progress != nil {
					fmt.Fprintf(progress, "%-8s N=%5d seed %d: inflation %.3f (Eq. 2 %.3f) goodput %.3f losses %d trims %d  %.2fs\n",
						pol.Name(), n, s, st.Inflation, Eq2(env.RLCC, n), st.Goodput, st.Losses, st.Trims, st.WallSeconds)
				}
				infl = append(infl, st.Inflation)
				gp = append(gp, st.Goodput)
				loss = append(loss, float64(st.Losses)/float64(n))
				trims = append(trims, float64(st.Trims))
			}
			rows = append(rows, Fig3Row{Policy: pol.Name(), Flows: n, Inflation: spread(infl), Eq2: Eq2(env.RLCC, n),
				Goodput: spread(gp), Losses: spread(loss), Trims: spread(trims)})
		}
	}
	return rows, nil
}

// PlotFig3 draws mean RTT inflation against N (log scale) per policy with the seeds'
// range as error bars, and Eq. 2; fits (optional) adds, dotted, the least-squares
// a*sqrt(N)+b of every policy other than the RL-CC ones (network, trees).
func PlotFig3(path string, rows []Fig3Row, fits map[string]SqrtFit) error {
	p := plot.New()
	p.Title.Text = "RTT inflation vs number of flows (incast, one switch port)"
	p.X.Label.Text = "flows N"
	p.Y.Label.Text = "mean RTT / base RTT"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	var names []string
	by := map[string]plotter.XYs{}
	lo := map[string]plotter.YErrors{}
	eq := plotter.XYs{}
	for _, r := range rows {
		if _, ok := by[r.Policy]; !ok {
			names = append(names, r.Policy)
		}
		by[r.Policy] = append(by[r.Policy], plotter.XY{X: float64(r.Flows), Y: r.Inflation.Mean})
		lo[r.Policy] = append(lo[r.Policy], struct{ Low, High float64 }{r.Inflation.Mean - r.Inflation.Min, r.Inflation.Max - r.Inflation.Mean})
		if len(eq) == 0 || eq[len(eq)-1].X != float64(r.Flows) {
			eq = append(eq, plotter.XY{X: float64(r.Flows), Y: r.Eq2})
		}
	}
	for i, name := range names {
		ln, pts, err := plotter.NewLinePoints(by[name])
		if err != nil {
			return err
		}
		ln.Color = plotutil.Color(i)
		pts.Color = plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		eb, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{by[name], lo[name]})
		if err != nil {
			return err
		}
		eb.Color = plotutil.Color(i)
		p.Add(ln, pts, eb)
		p.Legend.Add(name, ln, pts)
		if f, ok := fits[name]; ok && name != "network" && name != "trees" {
			var xy plotter.XYs
			for _, q := range by[name] {
				xy = append(xy, plotter.XY{X: q.X, Y: f.At(int(q.X))})
			}
			fl, err := plotter.NewLine(xy)
			if err != nil {
				return err
			}
			fl.Color = plotutil.Color(i)
			fl.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
			p.Add(fl)
			p.Legend.Add(fmt.Sprintf("%s fit: %.3f*sqrt(N)+%.2f", name, f.A, f.B), fl)
		}
	}
	l, err := plotter.NewLine(eq)
	if err != nil {
		return err
	}
	l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(l)
	p.Legend.Add("Eq. 2: target*sqrt(N) + beta", l)
	p.Legend.Left, p.Legend.Top = true, true
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

// SqrtFit is the least-squares fit y = A*sqrt(N) + B with its coefficient of
// determination (the paper's Fig. 3 fits such a curve to Swift's inflation).
type SqrtFit struct{ A, B, R2 float64 }

// FitSqrt fits y = A*sqrt(n) + B by least squares. It needs two distinct n.
func FitSqrt(ns []int, ys []float64) (SqrtFit, error) {
	if len(ns) != len(ys) || len(ns) < 2 {
		return SqrtFit{}, fmt.Errorf("fit: %d points for %d sizes, need 2 or more", len(ys), len(ns))
	}
	var sx, sy, sxx, sxy float64
	k := float64(len(ns))
	for i, n := range ns {
		x := math.Sqrt(float64(n))
		sx, sy, sxx, sxy = sx+x, sy+ys[i], sxx+x*x, sxy+x*ys[i]
	}
	den := k*sxx - sx*sx
	if den <= 1e-12*k*sxx {
		return SqrtFit{}, fmt.Errorf("fit: the sizes do not vary")
	}
	f := SqrtFit{A: (k*sxy - sx*sy) / den}
	f.B = (sy - f.A*sx) / k
	var ssr, sst float64
	for i, n := range ns {
		r := ys[i] - f.At(n)
		d := ys[i] - sy/k
		ssr, sst = ssr+r*r, sst+d*d
	}
	f.R2 = 1
	if sst > 0 {
		f.R2 = 1 - ssr/sst
	}
	return f, nil
}

// At is the fitted value at n.
func (f SqrtFit) At(n int) float64 { return f.A*math.Sqrt(float64(n)) + f.B }

// Fig3Fits fits A*sqrt(N) + B to each policy's mean inflation in rows, by policy name in
// order of first appearance.
func Fig3Fits(rows []Fig3Row) ([]string, map[string]SqrtFit, error) {
	var names []string
	ns, ys := map[string][]int{}, map[string][]float64{}
	for _, r := range rows {
		if _, ok := ns[r.Policy]; !ok {
			names = append(names, r.Policy)
		}
		ns[r.Policy] = append(ns[r.Policy], r.Flows)
		ys[r.Policy] = append(ys[r.Policy], r.Inflation.Mean)
	}
	fits := map[string]SqrtFit{}
	for _, n := range names {
		f, err := FitSqrt(ns[n], ys[n])
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", n, err)
		}
		fits[n] = f
	}
	return names, fits, nil
}
