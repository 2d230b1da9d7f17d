package sweep

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// skipped are summary fields that are not metrics: identity, and wall-clock figures that
// differ between machines (they stay in each run's file).
var skipped = map[string]bool{"seed": true, "hosts": true, "wall_s": true, "hops_per_s": true}

// Metrics flattens a JSON summary's numbers into (name, value) pairs in the summary's
// order ("completion_rel", "fct.p99_ns", ...), then adds the derived "retx" (all
// retransmissions) and "unfinished" (flows neither completed nor failed).
func Metrics(result []byte) ([]string, []float64, error) {
	var names []string
	var vals []float64
	dec := json.NewDecoder(bytes.NewReader(result))
	dec.UseNumber()
	var walk func(prefix string) error
	walk = func(prefix string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				for dec.More() {
					k, err := dec.Token()
					if err != nil {
						return err
					}
					if err := walk(prefix + k.(string) + "."); err != nil {
						return err
					}
				}
			case '[':
				for dec.More() { // lists are not metrics: skip them
					if err := walk("\x00"); err != nil {
						return err
					}
				}
			}
			_, err := dec.Token() // the closing delimiter
			return err
		case json.Number:
			name := strings.TrimSuffix(prefix, ".")
			if strings.HasPrefix(name, "\x00") || skipped[name] {
				return nil
			}
			f, err := t.Float64()
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			names, vals = append(names, name), append(vals, f)
		}
		return nil
	}
	if err := walk(""); err != nil {
		return nil, nil, fmt.Errorf("result summary: %w", err)
	}
	get := func(n string) float64 {
		if i := slices.Index(names, n); i >= 0 {
			return vals[i]
		}
		return 0
	}
	names = append(names, "retx", "unfinished")
	vals = append(vals, get("retx_sack")+get("retx_nack")+get("retx_timeout"), get("flows")-get("completed")-get("failed"))
	return names, vals, nil
}

// Stat summarises one metric over a point's seeds.
type Stat struct {
	Mean float64   `json:"mean"` // arithmetic mean
	Min  float64   `json:"min"`  // smallest run
	Max  float64   `json:"max"`  // largest run
	Std  float64   `json:"std"`  // sample standard deviation (n-1; 0 for one seed)
	Runs []float64 `json:"runs"` // per seed, in seed order
}

func stat(xs []float64) Stat {
	s := Stat{Min: math.Inf(1), Max: math.Inf(-1), Runs: xs}
	for _, x := range xs {
		s.Mean += x
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
	}
	s.Mean /= float64(len(xs))
	if len(xs) > 1 {
		v := 0.0
		for _, x := range xs {
			v += (x - s.Mean) * (x - s.Mean)
		}
		s.Std = math.Sqrt(v / float64(len(xs)-1))
	}
	return s
}

// Row is one point of the grid.
type Row struct {
	Point  int      `json:"point"`  // index in the grid
	Values []string `json:"values"` // one per axis
	Seeds  []uint64 `json:"seeds"`  // the seeds run
	Stats  []Stat   `json:"stats"`  // one per Table.Metrics
	// FCT is the mean over seeds of the runs' FCT quantiles 0..100 % (ns), when every
	// run of the sweep recorded them: the point's FCT CDF.
	FCT []float64 `json:"fct_quantiles_ns,omitempty"`
}

// Table is a merged sweep: one row per point.
type Table struct {
	Sweep   *Spec    `json:"sweep"`   // its definition
	Metrics []string `json:"metrics"` // names of the Stats columns
	Rows    []Row    `json:"rows"`    // one per point, in grid order
}

// Merge combines the runs of one sweep (any order) into its table. Every job must be
// present exactly once.
func Merge(runs []*Run) (*Table, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("merge: no runs")
	}
	sp := runs[0].Sweep
	if sp == nil || sp.Seeds < 1 {
		return nil, fmt.Errorf("merge: run file without its sweep")
	}
	id := runs[0].ID
	byJob := make([]*Run, sp.Jobs())
	for _, r := range runs {
		if r.ID != id {
			return nil, fmt.Errorf("merge: job %d belongs to sweep %s, job %d to %s (%s vs %s)", runs[0].Job, id, r.Job, r.ID,
				runs[0].Sweep.describe(), r.Sweep.describe())
		}
		if r.Job < 0 || r.Job >= len(byJob) {
			return nil, fmt.Errorf("merge: job %d out of range 0..%d", r.Job, len(byJob)-1)
		}
		if byJob[r.Job] != nil {
			return nil, fmt.Errorf("merge: job %d twice", r.Job)
		}
		byJob[r.Job] = r
	}
	var missing []string
	for k, r := range byJob {
		if r == nil {
			missing = append(missing, strconv.Itoa(k))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("merge: %d of %d jobs missing: %s", len(missing), len(byJob), strings.Join(missing, ","))
	}
	// Runs that recorded their FCT quantiles add the fastest flow and the spread between
	// the fastest and the slowest (the SMaRTT paper's Fig. 1 reports both); a sweep with
	// any run from before quantiles existed reports neither.
	withQ := !slices.ContainsFunc(byJob, func(r *Run) bool { return len(r.FCT) != 101 })
	t := &Table{Sweep: sp}
	for p := range sp.Points() {
		row := Row{Point: p, Values: sp.Values(p)}
		var cols [][]float64
		for s := range sp.Seeds {
			r := byJob[p*sp.Seeds+s]
			names, vals, err := Metrics(r.Result)
			if err != nil {
				return nil, fmt.Errorf("job %d: %w", r.Job, err)
			}
			if withQ {
				names = append(names, "fct.min_ns", "fct.spread_ns")
				vals = append(vals, float64(r.FCT[0]), float64(r.FCT[100]-r.FCT[0]))
				if row.FCT == nil {
					row.FCT = make([]float64, 101)
				}
				for i, q := range r.FCT {
					row.FCT[i] += float64(q) / float64(sp.Seeds)
				}
			}
			if t.Metrics == nil {
				t.Metrics = names
			}
			if !slices.Equal(names, t.Metrics) {
				return nil, fmt.Errorf("merge: job %d reports other metrics than job 0 (runs from different versions?)", r.Job)
			}
			if cols == nil {
				cols = make([][]float64, len(names))
			}
			for i, v := range vals {
				cols[i] = append(cols[i], v)
			}
			row.Seeds = append(row.Seeds, r.Seed)
		}
		for _, c := range cols {
			row.Stats = append(row.Stats, stat(c))
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}

func (s *Spec) describe() string {
	var a []string
	for _, x := range s.Axes {
		a = append(a, x.String())
	}
	return fmt.Sprintf("%s [%s] x %d seeds", s.Scenario, strings.Join(a, " "), s.Seeds)
}

// Metric returns the column of name, or an error listing the metrics.
func (t *Table) Metric(name string) (int, error) {
	if i := slices.Index(t.Metrics, name); i >= 0 {
		return i, nil
	}
	return 0, fmt.Errorf("metric %q: not in the summary (one of %s)", name, strings.Join(t.Metrics, ", "))
}

func num(x float64) string { return strconv.FormatFloat(x, 'g', 7, 64) }

// WriteCSV writes one row per point: the axis values, the seeds, then mean, min, max and
// std of every metric.
func (t *Table) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	var head []string
	for _, a := range t.Sweep.Axes {
		head = append(head, a.Field)
	}
	head = append(head, "seeds")
	for _, m := range t.Metrics {
		head = append(head, m+"_mean", m+"_min", m+"_max", m+"_std")
	}
	_ = cw.Write(head)
	for _, r := range t.Rows {
		rec := slices.Clone(r.Values)
		var seeds []string
		for _, s := range r.Seeds {
			seeds = append(seeds, strconv.FormatUint(s, 10))
		}
		rec = append(rec, strings.Join(seeds, " "))
		for _, s := range r.Stats {
			rec = append(rec, num(s.Mean), num(s.Min), num(s.Max), num(s.Std))
		}
		_ = cw.Write(rec)
	}
	cw.Flush()
	return cw.Error()
}

// WriteJSON writes the table, per-seed values included, as indented JSON.
func (t *Table) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(t)
}

// WriteMarkdown writes the chosen metrics as "mean (min..max)" in a markdown table.
func (t *Table) WriteMarkdown(w io.Writer, metrics []string) error {
	var cols []int
	for _, m := range metrics {
		i, err := t.Metric(m)
		if err != nil {
			return err
		}
		cols = append(cols, i)
	}
	var head []string
	for _, a := range t.Sweep.Axes {
		head = append(head, a.Field)
	}
	head = append(head, "seeds")
	for _, m := range metrics {
		head = append(head, m+" mean (min..max)")
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	for _, r := range t.Rows {
		cells := slices.Clone(r.Values)
		cells = append(cells, strconv.Itoa(len(r.Seeds)))
		for _, c := range cols {
			s := r.Stats[c]
			cells = append(cells, fmt.Sprintf("%s (%s..%s)", short(s.Mean), short(s.Min), short(s.Max)))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	return nil
}

// short formats a table cell: whole numbers from 1000 up, 4 significant digits below.
// WriteMarkdownPivot writes one metric as "mean (min..max)" with the values of the axis
// field as columns and one row per combination of the other axes (a comparison table).
func (t *Table) WriteMarkdownPivot(w io.Writer, metric, field string) error {
	col, err := t.Metric(metric)
	if err != nil {
		return err
	}
	ax := slices.IndexFunc(t.Sweep.Axes, func(a Axis) bool { return a.Field == field })
	if ax < 0 {
		return fmt.Errorf("-pivot %s: not an axis of the sweep", field)
	}
	var head []string
	for i, a := range t.Sweep.Axes {
		if i != ax {
			head = append(head, a.Field)
		}
	}
	for _, v := range t.Sweep.Axes[ax].Values {
		head = append(head, v)
	}
	fmt.Fprintf(w, "%s by %s, mean (min..max) over %d seeds:\n\n| %s |\n|%s\n", metric, field, t.Sweep.Seeds, strings.Join(head, " | "), strings.Repeat("---|", len(head)))
	var order []string
	cells := map[string][]string{}
	for _, r := range t.Rows {
		var key []string
		for i, v := range r.Values {
			if i != ax {
				key = append(key, v)
			}
		}
		k := strings.Join(key, "\x00")
		if _, ok := cells[k]; !ok {
			order = append(order, k)
			cells[k] = make([]string, len(t.Sweep.Axes[ax].Values))
		}
		s := r.Stats[col]
		cells[k][slices.Index(t.Sweep.Axes[ax].Values, r.Values[ax])] = fmt.Sprintf("%s (%s..%s)", short(s.Mean), short(s.Min), short(s.Max))
	}
	for _, k := range order {
		row := append(strings.Split(k, "\x00"), cells[k]...)
		if k == "" {
			row = cells[k]
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	return nil
}

func short(x float64) string {
	if math.Abs(x) >= 1000 {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}

// RunFile is where job k's result is kept under dir.
func RunFile(dir string, k int) string {
	return filepath.Join(dir, "runs", fmt.Sprintf("job-%06d.json", k))
}

// WriteRun writes r to RunFile(dir, r.Job) (through a temporary file, so a killed job
// leaves no half-written result).
func WriteRun(dir string, r *Run) error {
	path := RunFile(dir, r.Job)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadRuns reads every run file under dir/runs.
func ReadRuns(dir string) ([]*Run, error) {
	files, err := filepath.Glob(filepath.Join(dir, "runs", "job-*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("merge: no run files in %s", filepath.Join(dir, "runs"))
	}
	var runs []*Run
	for _, f := range files {
		r, err := ReadRun(f)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// ReadRun reads one run file.
func ReadRun(path string) (*Run, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Run
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Sweep == nil || len(r.Result) == 0 {
		return nil, fmt.Errorf("%s: not a sweep run file (no sweep or result)", path)
	}
	return &r, nil
}
