package train

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Fig8Run is one controller's all-to-all on the tree with its time series.
type Fig8Run struct {
	CC     string
	Stats  FabricStats
	Series *Series
}

// Fig8 runs an all-to-all of n flows on tree t for end ns with each controller (by
// name; "rlcc" is the embedded trees), totalling every flow per bin ns (the paper's
// Fig. 8: bandwidth and losses over time). Stats measure the window after warm.
func Fig8(env Env, t Tree, ccs []string, n int, seed uint64, warm, end, bin int64, progress io.Writer) ([]Fig8Run, error) {
	var runs []Fig8Run
	for _, c := range ccs {
		st, ts, err := env.RunTreeSeries(&CCPolicy{CC: c}, t, "all-to-all", n, seed, warm, end-warm, bin)
		if err != nil {
			return nil, fmt.Errorf("fig8 %s: %w", c, err)
		}
		if progress != nil {
			fmt.Fprintf(progress, "%-6s N=%5d seed %d: goodput %.3f RTT %.1f us losses %d (whole run %d)  %.1fs\n",
				c, n, seed, st.Goodput, st.RTTus, st.Losses, st.AllLosses, st.WallSeconds)
		}
		ts.pad(int(end / bin))
		runs = append(runs, Fig8Run{CC: c, Stats: st, Series: ts})
	}
	return runs, nil
}

// pad extends the series to n bins (a run may end before its last ACK).
func (s *Series) pad(n int) {
	for len(s.Bytes) < n {
		s.add(int64(len(s.Bytes))*s.Bin, 0, 0, false)
	}
}

// Goodput is the payload acknowledged in bins [i, j) over capacity (bits/s) for that time.
func (s *Series) Goodput(i, j int, capacity float64) float64 {
	var b int64
	for k := i; k < j && k < len(s.Bytes); k++ {
		b += s.Bytes[k]
	}
	return float64(b) * 8 / (capacity * float64(int64(j-i)*s.Bin) / 1e9)
}

// RTTus is the mean RTT sample in bins [i, j), us (0 without samples).
func (s *Series) RTTus(i, j int) float64 {
	var sum, n float64
	for k := i; k < j && k < len(s.Bytes); k++ {
		sum, n = sum+s.RTTSum[k], n+s.RTTN[k]
	}
	if n == 0 {
		return 0
	}
	return sum / n / 1e3
}

// Lost is the number of packets judged lost in bins [i, j).
func (s *Series) Lost(i, j int) uint64 {
	var l uint64
	for k := i; k < j && k < len(s.Bytes); k++ {
		l += s.Losses[k]
	}
	return l
}

// LastLoss is the end of the last bin with a loss, ns (0: none).
func (s *Series) LastLoss() int64 {
	for k := len(s.Losses) - 1; k >= 0; k-- {
		if s.Losses[k] > 0 {
			return int64(k+1) * s.Bin
		}
	}
	return 0
}

// WriteFig8CSV writes every bin of every run: time, goodput, RTT, losses.
func WriteFig8CSV(path string, runs []Fig8Run, capacity float64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"cc", "t_us", "goodput", "rtt_us", "losses"})
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, r := range runs {
		s := r.Series
		for k := range s.Bytes {
			w.Write([]string{r.CC, g(float64(int64(k)*s.Bin) / 1e3), g(s.Goodput(k, k+1, capacity)), g(s.RTTus(k, k+1)), strconv.FormatUint(s.Losses[k], 10)})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// PlotFig8 draws goodput, mean RTT and losses per bin against time, one line per
// controller, into path with suffixes _goodput, _rtt and _loss (.png).
func PlotFig8(prefix string, runs []Fig8Run, capacity float64) error {
	for _, q := range []struct {
		suffix, label string
		get           func(s *Series, k int) float64
	}{
		{"_goodput", "goodput / line rate of the senders", func(s *Series, k int) float64 { return s.Goodput(k, k+1, capacity) }},
		{"_rtt", "mean RTT (us)", func(s *Series, k int) float64 { return s.RTTus(k, k+1) }},
		{"_loss", "packets judged lost per bin", func(s *Series, k int) float64 { return float64(s.Losses[k]) }},
	} {
		p := plot.New()
		p.Title.Text = "All-to-all on the 64-host tree over time (Fig. 8)"
		p.X.Label.Text = "time (us)"
		p.Y.Label.Text = q.label
		for i, r := range runs {
			pts := make(plotter.XYs, len(r.Series.Bytes))
			for k := range pts {
				pts[k] = plotter.XY{X: float64(int64(k)*r.Series.Bin) / 1e3, Y: q.get(r.Series, k)}
			}
			ln, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			ln.LineStyle.Width = vg.Points(1.5)
			ln.LineStyle.Color = plotutil.Color(i)
			p.Add(ln)
			p.Legend.Add(r.CC, ln)
		}
		if err := p.Save(8*vg.Inch, 3.5*vg.Inch, prefix+q.suffix+".png"); err != nil {
			return err
		}
	}
	return nil
}
