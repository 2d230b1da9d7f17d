package sim

import (
	"fmt"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// PlotFCTCDF draws the cumulative distribution of flow completion times of one or more
// results (one line each, labelled by balancer) into path (.png or .svg).
func PlotFCTCDF(path string, rs ...*Result) error {
	p := plot.New()
	p.Title.Text = "flow completion time CDF"
	p.X.Label.Text = "FCT (us)"
	p.Y.Label.Text = "fraction of flows"
	var lines []any
	for _, r := range rs {
		var f []float64
		for _, fl := range r.PerFlow {
			if fl.FCT >= 0 {
				f = append(f, float64(fl.FCT)/1e3)
			}
		}
		if len(f) == 0 {
			continue
		}
		slices.Sort(f)
		pts := make(plotter.XYs, 0, 2*len(f))
		for i, x := range f {
			pts = append(pts, plotter.XY{X: x, Y: float64(i) / float64(len(f))}, plotter.XY{X: x, Y: float64(i+1) / float64(len(f))})
		}
		lines = append(lines, fmt.Sprintf("%s %s", r.CC, r.LB), pts)
	}
	if len(lines) == 0 {
		return fmt.Errorf("plot: no completed flows")
	}
	if err := plotutil.AddLines(p, lines...); err != nil {
		return err
	}
	return p.Save(6*vg.Inch, 4*vg.Inch, path)
}

// PlotQueues draws the sampled data-queue occupancy over time of up to maxLines ports
// (the ones with the highest peaks) into path (.png or .svg).
func PlotQueues(path string, r *Result, maxLines int) error {
	if len(r.Samples) == 0 {
		return fmt.Errorf("plot: no queue samples (set output.sample_interval)")
	}
	return plotSeries(path, r.Samples, "queue occupancy", "data queue (KiB)", maxLines)
}

// PlotWindows draws the traced congestion windows over time (output.sample_windows) of
// up to maxLines flows (the largest peaks) into path (.png or .svg).
func PlotWindows(path string, r *Result, maxLines int) error {
	if len(r.Windows) == 0 {
		return fmt.Errorf("plot: no window traces (set output.sample_windows and sample_interval)")
	}
	return plotSeries(path, r.Windows, "congestion windows", "window (KiB)", maxLines)
}

// PlotUtil draws the sampled ports' send rates per output.sample_util window of up to
// maxLines ports (the highest peaks) into path (.png or .svg).
func PlotUtil(path string, r *Result, maxLines int) error {
	if len(r.Util) == 0 {
		return fmt.Errorf("plot: no utilisation samples (set output.sample_util)")
	}
	return plotSeriesScaled(path, r.Util, "port send rate", "Gbit/s", maxLines, 1e-3)
}

func plotSeries(path string, series []QueueSeries, title, ylabel string, maxLines int) error {
	return plotSeriesScaled(path, series, title, ylabel, maxLines, 1.0/1024)
}

// plotSeriesScaled plots the series with their values multiplied by scale.
func plotSeriesScaled(path string, series []QueueSeries, title, ylabel string, maxLines int, scale float64) error {
	type peak struct {
		i int
		m int32
	}
	var ps []peak
	for i, q := range series {
		ps = append(ps, peak{i, slices.Max(append([]int32{0}, q.Bytes...))})
	}
	slices.SortStableFunc(ps, func(a, b peak) int { return int(b.m - a.m) })
	if len(ps) > maxLines {
		ps = ps[:maxLines]
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time (us)"
	p.Y.Label.Text = ylabel
	var lines []any
	for _, pk := range ps {
		q := series[pk.i]
		pts := make(plotter.XYs, len(q.Bytes))
		for j := range q.Bytes {
			pts[j] = plotter.XY{X: float64(q.Times[j]) / 1e3, Y: float64(q.Bytes[j]) * scale}
		}
		lines = append(lines, q.Port, pts)
	}
	if err := plotutil.AddLines(p, lines...); err != nil {
		return err
	}
	return p.Save(8*vg.Inch, 4*vg.Inch, path)
}
