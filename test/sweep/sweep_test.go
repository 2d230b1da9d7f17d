package sweep

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/sim"
)

const scen = `name: tiny
seed: 5
topology: {kind: fattree2, hosts: 16, radix: 8, link_rate: 100Gbit, link_latency: 500ns, switch_latency: 500ns}
transport: {max_retransmits: 255}
workload: {kind: permutation, size: 64KiB}
failures:
  - {kind: degrade, a: tor0, b: spine0, at: 0s, rate: 50Gbit}
`

func axes(t *testing.T, sets ...string) []Axis {
	t.Helper()
	var out []Axis
	for _, s := range sets {
		a, err := ParseAxis(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

func TestParseAxis(t *testing.T) {
	a, err := ParseAxis(" workload.size = 1KiB, 2KiB ,[1, 2],{a: 1, b: 2}")
	if err != nil {
		t.Fatal(err)
	}
	if a.Field != "workload.size" || !reflect.DeepEqual(a.Values, []string{"1KiB", "2KiB", "[1, 2]", "{a: 1, b: 2}"}) {
		t.Fatalf("%+v", a)
	}
	for _, bad := range []string{"transport.cc", "=1", "transport.cc=a,,b", "transport.cc=", "a..b=1", "failures[x].rate=1", "failures[1]x=2"} {
		if _, err := ParseAxis(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Every kind of bad input is refused before anything runs, with the field named.
func TestNewNamesTheField(t *testing.T) {
	for _, c := range []struct{ set, want string }{
		{"transport.nosuch=1", "nosuch"},
		{"topology.hosts=abc", "topology.hosts"},
		{"transport.cc=smartt,nosuchcc", `transport.cc = "nosuchcc"`},
		{"transport.lb=nosuchlb", `transport.lb = "nosuchlb"`},
		{"failures[3].rate=1Gbit", "failures: no element 3"},
		{"seed.x=1", "seed is not a mapping"},
		{"transport.min_rto=fast", "transport.min_rto"},
	} {
		_, err := New("tiny", []byte(scen), axes(t, c.set), 1)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("-set %s: error %v, want it to name %q", c.set, err, c.want)
		}
	}
	if _, err := New("tiny", []byte(scen), axes(t, "seed=1", "seed=2"), 1); err == nil {
		t.Error("one field on two axes accepted")
	}
	if _, err := New("tiny", []byte(scen), nil, 0); err == nil {
		t.Error("-seeds 0 accepted")
	}
	// The bound on runs, at and beyond it.
	if _, err := New("tiny", []byte(scen), nil, MaxJobs); err != nil {
		t.Errorf("%d runs: %v", MaxJobs, err)
	}
	if _, err := New("tiny", []byte(scen), axes(t, "transport.cc=smartt,dctcp"), MaxJobs/2+1); err == nil {
		t.Errorf("%d runs accepted", MaxJobs+2)
	}
}

func TestGridAndSet(t *testing.T) {
	sp, err := New("tiny", []byte(scen), axes(t, "transport.cc=smartt,dctcp,swift", "topology.oversubscription=1,2",
		"output.sample_interval=1us", "failures[0].rate=25Gbit"), 3)
	if err != nil {
		t.Fatal(err)
	}
	if sp.Points() != 6 || sp.Jobs() != 18 {
		t.Fatalf("points %d jobs %d", sp.Points(), sp.Jobs())
	}
	// The first axis varies slowest; seeds count up from the scenario's.
	p, sc, err := sp.Job(11)
	if err != nil {
		t.Fatal(err)
	}
	if p != 3 || sc.Transport.CC != "dctcp" || sc.Topology.Oversubscription != 2 || sc.Seed != 7 {
		t.Fatalf("job 11: point %d cc %s osub %d seed %d", p, sc.Transport.CC, sc.Topology.Oversubscription, sc.Seed)
	}
	if sc.Output.SampleInterval != 1000 || sc.Failures[0].Rate != 25e9 || sc.Workload.Size != 64<<10 {
		t.Fatalf("fields: %+v %+v", sc.Output, sc.Failures[0])
	}
	if _, _, err := sp.Job(18); err == nil {
		t.Fatal("job 18 of 18 accepted")
	}
	if got := sp.Label(5); got != "transport.cc=swift topology.oversubscription=2 output.sample_interval=1us failures[0].rate=25Gbit" {
		t.Fatal(got)
	}
	// The base scenario is not modified by building points.
	_, sc0, _ := sp.Job(0)
	if sc0.Transport.CC != "smartt" || sc0.Seed != 5 || sc0.Topology.Oversubscription != 1 {
		t.Fatalf("job 0: %+v", sc0.Transport.CC)
	}
	// An empty scenario file takes fields from -set alone.
	if _, err := New("empty", nil, axes(t, "topology.kind=single", "topology.hosts=4"), 1); err != nil {
		t.Fatal(err)
	}
}

func fakeResult(sc *sim.Scenario) (*sim.Result, error) {
	// A stand-in whose figures depend on the point and seed, so merging can be checked.
	x := float64(sc.Seed)
	if sc.Transport.CC == "dctcp" {
		x *= 10
	}
	return &sim.Result{Seed: sc.Seed, CC: sc.Transport.CC, Flows: 4, Completed: 3, Ratio: x, Trims: uint64(2 * x),
		RetxSack: 1, RetxNack: 2, RetxTimeout: uint64(x), FCT: sim.FCTSummary{P99: int64(x) * 100}, WallSeconds: x}, nil
}

func TestRunMergeStats(t *testing.T) {
	sp, err := New("tiny", []byte(scen), axes(t, "transport.cc=smartt,dctcp"), 3)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var all []int
	for k := range sp.Jobs() {
		all = append(all, k)
	}
	tables := map[int]*Table{}
	for _, par := range []int{1, 4} {
		var runs []*Run
		err := sp.RunJobs(all, par, fakeResult, func(k int, r *Run, _ *sim.Result, err error, _ time.Duration) {
			if err != nil {
				t.Error(err)
				return
			}
			runs = append(runs, r)
			if par == 4 {
				if err := WriteRun(dir, r); err != nil {
					t.Error(err)
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		tb, err := Merge(runs)
		if err != nil {
			t.Fatal(err)
		}
		tables[par] = tb
	}
	if !reflect.DeepEqual(tables[1], tables[4]) {
		t.Fatal("the table depends on the number of workers")
	}
	tb := tables[1]
	col := func(name string) int {
		i, err := tb.Metric(name)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	for _, skipped := range []string{"wall_s", "seed", "hosts"} {
		if _, err := tb.Metric(skipped); err == nil {
			t.Errorf("%s is a metric", skipped)
		}
	}
	// dctcp: seeds 5, 6, 7 give 50, 60, 70: mean 60, std 10.
	r := tb.Rows[1]
	s := r.Stats[col("completion_rel")]
	if r.Values[0] != "dctcp" || s.Mean != 60 || s.Min != 50 || s.Max != 70 || math.Abs(s.Std-10) > 1e-9 || !reflect.DeepEqual(r.Seeds, []uint64{5, 6, 7}) {
		t.Fatalf("row %+v stat %+v", r, s)
	}
	if s := r.Stats[col("fct.p99_ns")]; s.Mean != 6000 {
		t.Fatalf("fct.p99_ns %+v", s)
	}
	if s := r.Stats[col("retx")]; s.Mean != 63 { // 1 + 2 + timeouts 50..70
		t.Fatalf("retx %+v", s)
	}
	if s := r.Stats[col("unfinished")]; s.Mean != 1 {
		t.Fatalf("unfinished %+v", s)
	}
	// The job files merge to the same table.
	runs, err := ReadRuns(dir)
	if err != nil {
		t.Fatal(err)
	}
	fromFiles, err := Merge(runs)
	if err != nil || !reflect.DeepEqual(fromFiles.Rows, tb.Rows) {
		t.Fatalf("from files: %v", err)
	}
	// A missing job, a duplicate and a run of another sweep are refused.
	if _, err := Merge(runs[1:]); err == nil || !strings.Contains(err.Error(), "missing: 0") {
		t.Fatalf("missing job: %v", err)
	}
	if _, err := Merge(append(runs, runs[2])); err == nil || !strings.Contains(err.Error(), "job 2 twice") {
		t.Fatalf("duplicate: %v", err)
	}
	other := *runs[3]
	other.ID = "x"
	if _, err := Merge(append(runs[:3:3], &other)); err == nil || !strings.Contains(err.Error(), "belongs to sweep") {
		t.Fatalf("other sweep: %v", err)
	}
	if err := os.WriteFile(RunFile(dir, 99), []byte(`{"bogus": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRuns(dir); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("bad run file: %v", err)
	}
	// Outputs.
	var csvb, md strings.Builder
	if err := tb.WriteCSV(&csvb); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(csvb.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "transport.cc,seeds,") || !strings.Contains(lines[2], "dctcp,5 6 7,") {
		t.Fatalf("csv:\n%s", csvb.String())
	}
	if err := tb.WriteMarkdown(&md, []string{"completion_rel", "trims"}); err != nil || !strings.Contains(md.String(), "| dctcp | 3 | 60 (50..70) | 120 (100..140) |") {
		t.Fatalf("markdown %v:\n%s", err, md.String())
	}
	for _, f := range []string{"x.svg", "x.png"} {
		if err := tb.Plot(filepath.Join(dir, f), "fct.p99_ns"); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() < 1000 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if err := tb.Plot(filepath.Join(dir, "y.svg"), "nosuch"); err == nil || !strings.Contains(err.Error(), "completion_rel") {
		t.Fatalf("unknown metric: %v", err)
	}
}

// After the first failure no further job starts.
func TestRunJobsStopsOnError(t *testing.T) {
	sp, err := New("tiny", []byte(scen), axes(t, "transport.cc=smartt,dctcp"), 10)
	if err != nil {
		t.Fatal(err)
	}
	started := 0
	boom := errors.New("boom")
	err = sp.RunJobs([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 1, func(sc *sim.Scenario) (*sim.Result, error) {
		started++
		if started == 3 {
			return nil, boom
		}
		return fakeResult(sc)
	}, func(int, *Run, *sim.Result, error, time.Duration) {})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "job 2 (transport.cc=smartt, seed 7)") {
		t.Fatalf("error %v", err)
	}
	if started > 4 {
		t.Fatalf("%d jobs started after the failure", started-3)
	}
}

func TestNumericAxisPlot(t *testing.T) {
	sp, err := New("tiny", []byte(scen), axes(t, "topology.oversubscription=1,2,4", "transport.cc=smartt,dctcp"), 2)
	if err != nil {
		t.Fatal(err)
	}
	var runs []*Run
	for k := range sp.Jobs() {
		_, sc, err := sp.Job(k)
		if err != nil {
			t.Fatal(err)
		}
		res, _ := fakeResult(sc)
		r, err := sp.NewRun(k, res)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	tb, err := Merge(runs)
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.Plot(filepath.Join(t.TempDir(), "p.svg"), "completion_rel"); err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	if err := tb.WriteMarkdownPivot(&md, "completion_rel", "transport.cc"); err != nil {
		t.Fatal(err)
	}
	want := "completion_rel by transport.cc, mean (min..max) over 2 seeds:\n\n| topology.oversubscription | smartt | dctcp |\n|---|---|---|\n" +
		"| 1 | 5.5 (5..6) | 55 (50..60) |\n| 2 | 5.5 (5..6) | 55 (50..60) |\n| 4 | 5.5 (5..6) | 55 (50..60) |\n"
	if md.String() != want {
		t.Fatalf("pivot:\n%s\nwant:\n%s", md.String(), want)
	}
	if err := tb.WriteMarkdownPivot(&md, "completion_rel", "seed"); err == nil {
		t.Fatal("pivot on a field that is not an axis accepted")
	}
}

// Runs record their FCT quantiles; a merged sweep reports the fastest flow and the
// spread, averages the quantile functions over seeds and draws one CDF per group.
func TestFCTQuantilesAndCDF(t *testing.T) {
	// 200 flows with FCTs 1..200 us (one failed, one unfinished): nearest-rank quantiles.
	flows := make([]sim.FlowResult, 202)
	for i := range 200 {
		flows[i].FCT = int64(i+1) * 1000
	}
	flows[200] = sim.FlowResult{FCT: 5, Failed: true}
	flows[201] = sim.FlowResult{FCT: -1}
	q := FCTQuantiles(flows)
	if len(q) != 101 || q[0] != 1000 || q[1] != 2000 || q[50] != 100000 || q[99] != 198000 || q[100] != 200000 {
		t.Fatalf("quantiles %v", q)
	}
	if FCTQuantiles(flows[200:]) != nil {
		t.Fatal("quantiles of no completed flow")
	}
	withFlows := func(sc *sim.Scenario) (*sim.Result, error) {
		r, _ := fakeResult(sc)
		scale := int64(sc.Seed) // seed s: FCTs s..200s us
		if sc.Transport.CC == "dctcp" {
			scale *= 2
		}
		r.PerFlow = make([]sim.FlowResult, 200)
		for i := range r.PerFlow {
			r.PerFlow[i].FCT = int64(i+1) * 1000 * scale
		}
		return r, nil
	}
	sp, err := New("tiny", []byte(scen), axes(t, "transport.cc=smartt,dctcp", "topology.oversubscription=1,4"), 2)
	if err != nil {
		t.Fatal(err)
	}
	runs := runAll(t, sp, 2, withFlows)
	tb, err := Merge(runs)
	if err != nil {
		t.Fatal(err)
	}
	imin, err1 := tb.Metric("fct.min_ns")
	ispread, err2 := tb.Metric("fct.spread_ns")
	if err1 != nil || err2 != nil {
		t.Fatalf("metrics %v: %v %v", tb.Metrics, err1, err2)
	}
	// Point 2 is dctcp at 1:1: seed s scales the FCTs by 2s.
	r := tb.Rows[2]
	s0, s1 := float64(2*r.Seeds[0]), float64(2*r.Seeds[1])
	if r.Values[0] != "dctcp" || r.Stats[imin].Min != 1000*s0 || r.Stats[imin].Max != 1000*s1 || r.Stats[ispread].Mean != 199*1000*(s0+s1)/2 {
		t.Fatalf("row %v seeds %v: min %+v spread %+v", r.Values, r.Seeds, r.Stats[imin], r.Stats[ispread])
	}
	if len(r.FCT) != 101 || r.FCT[100] != 200*1000*(s0+s1)/2 || r.FCT[0] != 1000*(s0+s1)/2 {
		t.Fatalf("mean quantiles %v", r.FCT)
	}
	dir := t.TempDir()
	files, err := tb.PlotCDFs(dir, "transport.cc", "png")
	if err != nil || len(files) != 2 || filepath.Base(files[1]) != "fct_cdf_4.png" {
		t.Fatalf("cdfs %v: %v", files, err)
	}
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.Size() < 1000 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if _, err := tb.PlotCDFs(dir, "nosuch", "png"); err == nil {
		t.Fatal("a CDF over a field that is not an axis")
	}
	// One run from before quantiles existed: no quantile metrics, and no CDFs.
	old := *runs[0]
	old.FCT = nil
	mixed, err := Merge(append([]*Run{&old}, runs[1:]...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mixed.Metric("fct.min_ns"); err == nil {
		t.Fatal("fct.min_ns with a run that has no quantiles")
	}
	if _, err := mixed.PlotCDFs(dir, "transport.cc", "png"); err == nil || !strings.Contains(err.Error(), "no FCT quantiles") {
		t.Fatalf("cdf without quantiles: %v", err)
	}
}

// A sweep adopts the runs of another over the same scenario file whose point and seed it
// has, renumbered as its own jobs; anything else is refused.
func TestAdopt(t *testing.T) {
	big, err := New("tiny", []byte(scen), axes(t, "transport.cc=smartt,dctcp", "topology.oversubscription=1,2"), 2)
	if err != nil {
		t.Fatal(err)
	}
	runs := runAll(t, big, 1, fakeResult)
	// The 2:1 half, axes in the other order, controllers reversed: 2 points x 2 seeds.
	small, err := New("tiny", []byte(scen), axes(t, "topology.oversubscription=2", "transport.cc=dctcp,smartt"), 2)
	if err != nil {
		t.Fatal(err)
	}
	var got []*Run
	for _, r := range runs {
		if c, ok := small.Adopt(r); ok {
			got = append(got, c)
			if want := small.Values(c.Point); !slices.Equal(c.Values, want) || c.ID != small.ID() || c.Sweep != small {
				t.Errorf("job %d: values %v want %v", c.Job, c.Values, want)
			}
			_, sc, _ := small.Job(c.Job)
			if sc.Seed != c.Seed || sc.Transport.CC != c.Values[1] || sc.Topology.Oversubscription != 2 {
				t.Errorf("job %d is seed %d %s at %d:1, the run seed %d %v", c.Job, sc.Seed, sc.Transport.CC, sc.Topology.Oversubscription, c.Seed, c.Values)
			}
		}
	}
	if len(got) != 4 {
		t.Fatalf("adopted %d runs, want 4", len(got))
	}
	tb, err := Merge(got) // every job exactly once
	if err != nil {
		t.Fatal(err)
	}
	if tb.Rows[0].Values[1] != "dctcp" || tb.Rows[0].Stats[0].Runs == nil {
		t.Fatalf("rows %+v", tb.Rows)
	}
	// Other seeds, another scenario file, another set of axes: nothing.
	for _, other := range []func() (*Spec, error){
		func() (*Spec, error) {
			return New("tiny", []byte(scen), axes(t, "topology.oversubscription=2", "transport.cc=dctcp,smartt"), 3)
		},
		func() (*Spec, error) {
			return New("tiny", []byte(scen+"\n# changed\n"), axes(t, "topology.oversubscription=2", "transport.cc=dctcp,smartt"), 2)
		},
		func() (*Spec, error) { return New("tiny", []byte(scen), axes(t, "transport.cc=dctcp,smartt"), 2) },
	} {
		sp, err := other()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range runs {
			if c, ok := sp.Adopt(r); ok {
				if _, sc, _ := sp.Job(c.Job); sc.Seed != c.Seed {
					t.Errorf("adopted seed %d as job %d of seed %d", c.Seed, c.Job, sc.Seed)
				}
				n++
			}
		}
		if want := map[int]int{3: 4}[sp.Seeds]; n != want { // 3 seeds: seeds 1 and 2 of each point only
			t.Errorf("%s: adopted %d runs, want %d", sp.describe(), n, want)
		}
	}
}

// runAll runs every job of sp with run, par at once, and returns the runs.
func runAll(t *testing.T, sp *Spec, par int, run Runner) []*Run {
	t.Helper()
	var all []int
	for k := range sp.Jobs() {
		all = append(all, k)
	}
	var runs []*Run
	if err := sp.RunJobs(all, par, run, func(_ int, r *Run, _ *sim.Result, err error, _ time.Duration) {
		if err != nil {
			t.Error(err)
		}
		runs = append(runs, r)
	}); err != nil {
		t.Fatal(err)
	}
	return runs
}
