// Package mpisuites renders the stored results of the third-party MPI and libfabric
// suites (scripts/mpi-suites: fi_pingpong, MPICH's test/mpi, ScaLAPACK, mpi4py, NetPIPE)
// over the smartt libfabric provider beside libfabric's tcp provider, for
// docs/results/mpi.md. The suites take minutes, so the page is checked against the stored
// data, not by rerunning them.
package mpisuites

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Suites lists the suites in the order the page shows them, with their titles.
var Suites = []struct{ Name, Title string }{
	{"pingpong", "fi_pingpong (RDM, msg and tagged, every size, data checks)"},
	{"mpich-pt2pt", "MPICH test/mpi pt2pt (Open MPI, <= 4 ranks)"},
	{"mpich-coll", "MPICH test/mpi coll (Open MPI, <= 4 ranks)"},
	{"scalapack", "ScaLAPACK test programs (4 ranks)"},
	{"mpi4py", "mpi4py smoke (2 and 4 ranks)"},
}

// Goal ratios of the issue: wall time and latency at most 1.5x tcp's, bandwidth at least tcp's.
const (
	WallGoal    = 1.5
	LatencyGoal = 1.5
)

// Run is one suite's stored run over one provider.
type Run struct {
	Wall    float64            // seconds, the whole suite
	Date    string             // when it ran (UTC)
	Limit   string             // "all", or N: only the testlist's first N entries ran
	Daemons string             // smartt: the daemons its ranks were spread over ("" : not said, 4)
	Tests   map[string]Outcome // by test name
}

// Outcome is one test's result.
type Outcome struct {
	Pass    bool
	Seconds float64
}

// ReadRun parses PROVIDER/SUITE.tsv: a "# provider P suite S wall_s W date D" header, then
// "name<TAB>pass|fail<TAB>seconds" lines. A missing file is (nil, nil): not run.
func ReadRun(path string) (*Run, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r := &Run{Tests: map[string]Outcome{}}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			f := strings.Fields(line[1:])
			for i := 0; i+1 < len(f); i += 2 {
				switch f[i] {
				case "wall_s":
					if r.Wall, err = strconv.ParseFloat(f[i+1], 64); err != nil {
						return nil, fmt.Errorf("%s:%d: wall_s: %v", path, n, err)
					}
				case "date":
					r.Date = f[i+1]
				case "limit":
					r.Limit = f[i+1]
				case "daemons":
					r.Daemons = f[i+1]
				}
			}
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 || (f[1] != "pass" && f[1] != "fail") {
			return nil, fmt.Errorf("%s:%d: want name<TAB>pass|fail<TAB>seconds, got %q", path, n, line)
		}
		s, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: seconds: %v", path, n, err)
		}
		if _, dup := r.Tests[f[0]]; dup {
			return nil, fmt.Errorf("%s:%d: test %q twice", path, n, f[0])
		}
		r.Tests[f[0]] = Outcome{Pass: f[1] == "pass", Seconds: s}
	}
	return r, sc.Err()
}

// Passed returns the sorted names of the tests that passed.
func (r *Run) Passed() []string {
	var out []string
	for n, o := range r.Tests {
		if o.Pass {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Partial reports whether the run covered only the first Limit entries of its testlist.
func (r *Run) Partial() bool { return r.Limit != "" && r.Limit != "all" }

// CommonSeconds sums the test times of the tests both runs have: the fair comparison of
// two runs that stopped at different points of their testlist.
func CommonSeconds(a, b *Run) (sa, sb float64, n int) {
	for _, name := range slices.Sorted(maps.Keys(a.Tests)) { // one order: float sums round alike
		oa := a.Tests[name]
		if ob, ok := b.Tests[name]; ok {
			sa, sb, n = sa+oa.Seconds, sb+ob.Seconds, n+1
		}
	}
	return sa, sb, n
}

// Causes maps "suite/test" to why it passes over tcp and not over smartt (causes.tsv).
type Causes map[string]string

// ReadCauses parses lines "suite<TAB>test<TAB>cause"; # starts a comment.
func ReadCauses(path string) (Causes, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c := Causes{}
	for n, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 || f[2] == "" {
			return nil, fmt.Errorf("%s:%d: want suite<TAB>test<TAB>cause", path, n+1)
		}
		c[f[0]+"/"+f[1]] = f[2]
	}
	return c, nil
}

// Exception is a test that passes over tcp and not over smartt.
type Exception struct {
	Suite, Test, Cause string
}

// Exceptions compares two runs of one suite: every tcp pass that is not a smartt pass,
// with its cause (or "not diagnosed").
func Exceptions(suite string, tcp, smartt *Run, causes Causes) []Exception {
	var out []Exception
	for _, n := range tcp.Passed() {
		o, ok := smartt.Tests[n]
		if ok && o.Pass || !ok && smartt.Partial() {
			continue // passed, or not reached in a run cut short
		}
		c := causes[suite+"/"+n]
		if c == "" {
			c = "not diagnosed"
		}
		out = append(out, Exception{suite, n, c})
	}
	return out
}

// Setups are the smartt deployments the page compares with tcp, each a directory of
// docs/results/mpi that scripts/mpi-suites writes (by SMARTT_DAEMONS).
var Setups = []struct{ Dir, Title string }{
	{"smartt", "4 daemons"},   // one per rank: as on four hosts, every message crosses UDP
	{"smartt-1d", "1 daemon"}, // one for every rank: as on one host
}

// BothPassedSeconds sums the test times of the tests that passed in both runs: the
// comparison that leaves out the time limits failing tests wait out on both.
func BothPassedSeconds(a, b *Run) (sa, sb float64, n int) {
	for _, name := range slices.Sorted(maps.Keys(a.Tests)) { // one order: float sums round alike
		oa := a.Tests[name]
		if ob, ok := b.Tests[name]; ok && oa.Pass && ob.Pass {
			sa, sb, n = sa+oa.Seconds, sb+ob.Seconds, n+1
		}
	}
	return sa, sb, n
}

// Load reads every suite's runs under dir (docs/results/mpi): runs[provider][suite],
// provider "tcp" or a Setups directory.
func Load(dir string) (map[string]map[string]*Run, error) {
	runs := map[string]map[string]*Run{}
	provs := []string{"tcp"}
	for _, s := range Setups {
		provs = append(provs, s.Dir)
	}
	for _, p := range provs {
		runs[p] = map[string]*Run{}
		for _, s := range Suites {
			r, err := ReadRun(filepath.Join(dir, p, s.Name+".tsv"))
			if err != nil {
				return nil, err
			}
			if r != nil {
				runs[p][s.Name] = r
			}
		}
	}
	return runs, nil
}
