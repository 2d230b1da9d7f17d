package sweep

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// errPoints are a series' means with their spread (min..max over seeds) as error bars.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// Plot draws metric against the first axis into path (.png or .svg): one line per
// combination of the other axes, each point the mean over seeds with min..max as error
// bars. A numeric first axis is a numeric x axis; otherwise its values are categories.
func (t *Table) Plot(path, metric string) error {
	col, err := t.Metric(metric)
	if err != nil {
		return err
	}
	sp := t.Sweep
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %s (mean, min..max over %d seeds)", sp.Scenario, metric, sp.Seeds)
	p.Y.Label.Text = metric
	p.Legend.Top = true
	var xs []string
	if len(sp.Axes) > 0 {
		xs = sp.Axes[0].Values
		p.X.Label.Text = sp.Axes[0].Field
	}
	numeric := len(xs) > 0
	xv := make([]float64, len(xs))
	for i, x := range xs {
		f, err := strconv.ParseFloat(x, 64)
		if err != nil {
			numeric = false
			break
		}
		xv[i] = f
	}
	if !numeric {
		for i := range xv {
			xv[i] = float64(i)
		}
		if len(xs) > 0 {
			p.NominalX(xs...)
		} else {
			p.NominalX("")
		}
		xv = append(xv, 0) // no axis: one point at 0
	}
	// Rows with the same values of the other axes form a series, in first-seen order.
	var names []string
	series := map[string]*errPoints{}
	for _, r := range t.Rows {
		name := "all"
		if len(r.Values) > 1 {
			var parts []string
			for i, v := range r.Values[1:] {
				parts = append(parts, sp.Axes[i+1].Field+"="+v)
			}
			name = strings.Join(parts, " ")
		}
		xi := 0
		if len(r.Values) > 0 {
			xi = indexOf(xs, r.Values[0])
		}
		s := series[name]
		if s == nil {
			s = &errPoints{}
			series[name] = s
			names = append(names, name)
		}
		st := r.Stats[col]
		s.XYs = append(s.XYs, plotter.XY{X: xv[xi], Y: st.Mean})
		s.YErrors = append(s.YErrors, struct{ Low, High float64 }{st.Mean - st.Min, st.Max - st.Mean})
	}
	for i, name := range names {
		s := series[name]
		if !numeric && len(names) > 1 { // side by side within a category
			off := (float64(i) - float64(len(names)-1)/2) * 0.35 / float64(len(names))
			for j := range s.XYs {
				s.XYs[j].X += off
			}
		}
		l, pts, err := plotter.NewLinePoints(s)
		if err != nil {
			return err
		}
		c := plotutil.Color(i)
		l.Color, pts.Color = c, c
		pts.Shape = plotutil.Shape(i)
		if !numeric {
			l.LineStyle.Width = 0 // categories: no line between them
		}
		eb, err := plotter.NewYErrorBars(s)
		if err != nil {
			return err
		}
		eb.Color = c
		eb.CapWidth = vg.Points(6)
		p.Add(l, pts, eb)
		if len(names) > 1 || name != "all" {
			p.Legend.Add(name, l, pts)
		}
	}
	p.Add(plotter.NewGrid())
	if !numeric {
		p.X.Min, p.X.Max = -0.5, float64(max(1, len(xs)))-0.5
	}
	span := p.Y.Max - p.Y.Min
	p.Y.Min -= 0.05 * span // keep points and error bars off the axes
	p.Y.Max += 0.05 * span
	if len(names) > 1 || (len(names) == 1 && names[0] != "all") { // room for the legend above the data
		p.Y.Max += 0.08 * float64(len(names)+1) * span
	}
	p.Legend.ThumbnailWidth = vg.Points(20)
	// Wide enough that category labels do not run into each other.
	width := max(7, 0.8*float64(len(xs))+1.5)
	return p.Save(vg.Length(width)*vg.Inch, 4.5*vg.Inch, path)
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return 0
}

// PlotCDFs draws the FCT CDFs of the sweep: one plot per combination of the axes other
// than field, with one line per value of field (each the mean of its seeds' quantile
// functions). It writes DIR/fct_cdf.EXT when field is the only axis, else
// DIR/fct_cdf_<other values>.EXT, and returns the files written.
func (t *Table) PlotCDFs(dir, field, ext string) ([]string, error) {
	sp := t.Sweep
	ax := slices.IndexFunc(sp.Axes, func(a Axis) bool { return a.Field == field })
	if ax < 0 {
		return nil, fmt.Errorf("-cdf %s: not an axis of the sweep", field)
	}
	type group struct {
		title string
		rows  []*Row
	}
	var order []string
	groups := map[string]*group{}
	for i := range t.Rows {
		r := &t.Rows[i]
		if len(r.FCT) != 101 {
			return nil, fmt.Errorf("-cdf: point %s has no FCT quantiles (runs from before they were recorded?)", sp.Label(r.Point))
		}
		var key, title []string
		for j, v := range r.Values {
			if j != ax {
				key = append(key, v)
				title = append(title, sp.Axes[j].Field+"="+v)
			}
		}
		k := strings.Join(key, "_")
		if groups[k] == nil {
			groups[k] = &group{title: strings.Join(title, " ")}
			order = append(order, k)
		}
		groups[k].rows = append(groups[k].rows, r)
	}
	var files []string
	for _, k := range order {
		g := groups[k]
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: FCT CDF by %s (mean of %d seeds)", sp.Scenario, field, sp.Seeds)
		if g.title != "" {
			p.Title.Text += "\n" + g.title
		}
		p.X.Label.Text = "FCT (us)"
		p.Y.Label.Text = "fraction of flows"
		p.Legend.Top, p.Legend.Left = true, true
		var lines []any
		for _, r := range g.rows {
			pts := make(plotter.XYs, 0, 101)
			for q, ns := range r.FCT {
				pts = append(pts, plotter.XY{X: ns / 1e3, Y: float64(q) / 100})
			}
			lines = append(lines, r.Values[ax], pts)
		}
		if err := plotutil.AddLines(p, lines...); err != nil {
			return nil, err
		}
		p.Add(plotter.NewGrid())
		name := "fct_cdf." + ext
		if k != "" {
			name = "fct_cdf_" + fileSafe(k) + "." + ext
		}
		path := filepath.Join(dir, name)
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, path); err != nil {
			return nil, err
		}
		files = append(files, path)
	}
	return files, nil
}

// fileSafe keeps letters, digits, '.', '-' and '_' of s and turns the rest into '-'.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return '-'
	}, s)
}
