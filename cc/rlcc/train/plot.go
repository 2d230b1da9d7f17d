package train

import (
	"encoding/csv"
	"fmt"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// WriteCurveCSV writes the learning curve, one row per episode.
func WriteCurveCSV(path string, curve []Episode) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"iter", "flows", "decisions", "updates", "mean_reward", "mean_delta_over_target", "goodput", "rtt_inflation", "wall_s"})
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, e := range curve {
		w.Write([]string{strconv.Itoa(e.Iter), strconv.Itoa(e.Flows), strconv.Itoa(e.Decisions), strconv.Itoa(e.Updates),
			g(e.Reward), g(e.MeanDelta), g(e.Goodput), g(e.Inflation), g(e.Wall)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// PlotCurve draws mean reward per episode and its moving average over 20 episodes.
func PlotCurve(path string, curve []Episode) error {
	if len(curve) == 0 {
		return fmt.Errorf("plot: empty learning curve")
	}
	p := plot.New()
	p.Title.Text = "RL-CC training: mean reward per episode"
	p.X.Label.Text = "episode"
	p.Y.Label.Text = "mean reward -(delta/target)^2"
	pts := make(plotter.XYs, len(curve))
	avg := make(plotter.XYs, len(curve))
	const win = 20
	s := 0.0
	for i, e := range curve {
		pts[i] = plotter.XY{X: float64(e.Iter), Y: e.Reward}
		s += e.Reward
		if i >= win {
			s -= curve[i-win].Reward
		}
		avg[i] = plotter.XY{X: float64(e.Iter), Y: s / float64(min(i+1, win))}
	}
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return err
	}
	sc.GlyphStyle.Radius = vg.Points(1.5)
	ln, err := plotter.NewLine(avg)
	if err != nil {
		return err
	}
	ln.LineStyle.Width = vg.Points(2)
	p.Add(sc, ln)
	p.Legend.Add("episode", sc)
	p.Legend.Add("moving average (20)", ln)
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}
