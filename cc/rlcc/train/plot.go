package train

import (
	"encoding/csv"
	"fmt"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WriteCurveCSV writes the learning curve, one row per episode.
func WriteCurveCSV(path string, curve []Episode) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"iter", "flows", "decisions", "updates", "mean_reward", "steady_reward", "mean_delta_over_target", "goodput", "rtt_inflation", "wall_s"})
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, e := range curve {
		w.Write([]string{strconv.Itoa(e.Iter), strconv.Itoa(e.Flows), strconv.Itoa(e.Decisions), strconv.Itoa(e.Updates),
			g(e.Reward), g(e.Steady), g(e.MeanDelta), g(e.Goodput), g(e.Inflation), g(e.Wall)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// PlotCurve draws the mean reward per episode (whole episode and its second half, after
// the start-up) with moving averages over 20 episodes.
func PlotCurve(path string, curve []Episode) error {
	if len(curve) == 0 {
		return fmt.Errorf("plot: empty learning curve")
	}
	p := plot.New()
	p.Title.Text = "RL-CC training: mean reward per episode"
	p.X.Label.Text = "episode"
	p.Y.Label.Text = "mean reward -(delta/target)^2"
	const win = 20
	for i, s := range []struct {
		name string
		get  func(Episode) float64
	}{{"whole episode", func(e Episode) float64 { return e.Reward }}, {"second half", func(e Episode) float64 { return e.Steady }}} {
		pts := make(plotter.XYs, len(curve))
		avg := make(plotter.XYs, len(curve))
		sum := 0.0
		for k, e := range curve {
			pts[k] = plotter.XY{X: float64(e.Iter), Y: s.get(e)}
			sum += s.get(e)
			if k >= win {
				sum -= s.get(curve[k-win])
			}
			avg[k] = plotter.XY{X: float64(e.Iter), Y: sum / float64(min(k+1, win))}
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		sc.GlyphStyle.Radius = vg.Points(1.2)
		sc.GlyphStyle.Color = plotutil.Color(i)
		sc.GlyphStyle.Shape = plotutil.Shape(i)
		ln, err := plotter.NewLine(avg)
		if err != nil {
			return err
		}
		ln.LineStyle.Width = vg.Points(2)
		ln.LineStyle.Color = plotutil.Color(i)
		p.Add(sc, ln)
		p.Legend.Add(s.name, sc)
		p.Legend.Add(s.name+", moving average (20)", ln)
	}
	p.Legend.Top = false
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}
