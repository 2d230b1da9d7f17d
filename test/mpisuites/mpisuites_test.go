package mpisuites

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/test/results"
)

// The page shows what the stored suite runs say (docs/results/mpi/): a rerun of
// scripts/mpi-suites that changes them, or an edit of causes.tsv, fails here until
// `smartt-lab results -only mpi-suites` rewrites the page.
func TestResultsTable(t *testing.T) {
	causes, err := ReadCauses("causes.tsv")
	if err != nil {
		t.Fatal(err)
	}
	body, err := Render(filepath.Join("..", "..", "docs", "results", "mpi"), causes)
	if err != nil {
		t.Fatal(err)
	}
	results.Check(t, "mpi-suites", body)
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// renderHas renders dir and fails the test for each of wants the page lacks; it returns
// the page.
func renderHas(t *testing.T, dir string, causes Causes, wants ...string) string {
	t.Helper()
	out, err := Render(dir, causes)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	return out
}

// A tcp pass that fails (or is missing) over smartt is an exception with its cause, or
// "not diagnosed"; a tcp failure is not; the wall ratio is judged against 1.5x.
func TestRenderExceptionsAndRatio(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "tcp", "mpich-pt2pt.tsv"), "# provider tcp suite mpich-pt2pt wall_s 100.0 date D1 limit all\n"+
		"a 2\tpass\t1.0\nb 2\tpass\t1.0\nc 4\tpass\t1.0\nd 2\tfail\t1.0\n")
	write(t, filepath.Join(dir, "smartt", "mpich-pt2pt.tsv"), "# provider smartt suite mpich-pt2pt wall_s 160.0 date D2\n"+
		"a 2\tpass\t1.0\nb 2\tfail\t1.0\nd 2\tpass\t1.0\n")
	renderHas(t, dir, Causes{"mpich-pt2pt/b 2": "cancel of a sent message"},
		"| MPICH test/mpi pt2pt (Open MPI, <= 4 ranks) | 4 daemons | 4 | 3 | 2 | 2 | 100 | 160 | 1.60x (**not met**) | 1 / 1 (1.00x, 1 tests) |",
		"| mpich-pt2pt | b 2 | cancel of a sent message |",
		"| mpich-pt2pt | c 4 | not diagnosed |",
		"failing over tcp (1): d 2; of these, passing over smartt: d 2.",
		"| fi_pingpong (RDM, msg and tagged, every size, data checks) | 4 daemons | not run |",
		"NetPIPE: not run")
	write(t, filepath.Join(dir, "tcp", "mpich-pt2pt.tsv"), "# provider tcp suite mpich-pt2pt wall_s 100.0 date D1 limit 60\n"+
		"a 2\tpass\t1.0\nb 2\tpass\t1.0\nc 4\tpass\t1.0\nd 2\tfail\t1.0\n")
	write(t, filepath.Join(dir, "smartt", "mpich-pt2pt.tsv"), "# provider smartt suite mpich-pt2pt wall_s 150.0 date D2 limit 60\n"+
		"a 2\tpass\t1.0\nb 2\tpass\t1.0\nc 4\tpass\t1.0\n")
	// 1.5x exactly is met; no exceptions.
	renderHas(t, dir, nil, "(Open MPI, <= 4 ranks) (first 60 testlist entries only) | 4 daemons | 4 | 3 | 3 | 0 | 100 | 150 | 1.50x (met) |",
		"Every test that passes over tcp passes over smartt")
}

// Runs cut short at different points (SUITE_TIMEOUT): a tcp pass smartt never reached is
// no exception, and the ratio is of the summed times of the tests both ran, not of walls.
func TestRenderCutShort(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "tcp", "mpich-coll.tsv"), "# provider tcp suite mpich-coll wall_s 100.0 date D1 limit 4\n"+
		"a 4\tpass\t10.0\nb 4\tpass\t10.0\nc 4\tpass\t40.0\nd 4\tpass\t40.0\n")
	write(t, filepath.Join(dir, "smartt", "mpich-coll.tsv"), "# provider smartt suite mpich-coll wall_s 100.0 date D2 limit 3\n"+
		"a 4\tpass\t20.0\nb 4\tfail\t20.0\nc 4\tpass\t50.0\n")
	out, err := Render(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "| MPICH test/mpi coll (Open MPI, <= 4 ranks) (first 4/3 testlist entries only) | 4 daemons | 4 | 4 | 2 | 1 | 100 | 100 | 1.50x (met), summed times of the 3 tests both ran |"
	if !strings.Contains(out, want) || !strings.Contains(out, "| mpich-coll | b 4 | not diagnosed |") || strings.Contains(out, "| mpich-coll | d 4 |") {
		t.Errorf("want %q, b 4 an exception and d 4 not, in\n%s", want, out)
	}
}

// A smartt run over other than the page's four daemons says so in the Runs line; the
// header's daemons field changes nothing else.
func TestRenderDaemons(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "tcp", "scalapack.tsv"), "# provider tcp suite scalapack wall_s 100.0 date D1 limit all\n"+
		"xdqr\tpass\t100.0\n")
	write(t, filepath.Join(dir, "smartt", "scalapack.tsv"), "# provider smartt suite scalapack wall_s 120.0 date D2 limit all daemons 1\n"+
		"xdqr\tpass\t120.0\n")
	write(t, filepath.Join(dir, "smartt", "mpi4py.tsv"), "# provider smartt suite mpi4py wall_s 5.0 date D3 limit all daemons 4\n"+
		"smoke-2-ranks\tpass\t5.0\n")
	out := renderHas(t, dir, nil, "smartt scalapack D2 (1 daemons);", "smartt mpi4py D3.", "| 1 | 1 | 1 | 0 | 100 | 120 | 1.20x (met) |")
	if strings.Contains(out, "(4 daemons)") {
		t.Errorf("the default count named in\n%s", out)
	}
}

// A one-daemon run (smartt-1d) is a row of its own beside the four-daemon one, its
// exceptions named by the deployment; the passing-over-both column leaves out the tests
// that failed on either side (time limits waited out on both would dilute the ratio).
func TestRenderOneHost(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "tcp", "mpich-coll.tsv"), "# provider tcp suite mpich-coll wall_s 300.0 date D1 limit all\n"+
		"a 4\tpass\t10.0\nb 4\tpass\t10.0\nhang 4\tfail\t180.0\n")
	write(t, filepath.Join(dir, "smartt-1d", "mpich-coll.tsv"), "# provider smartt suite mpich-coll wall_s 330.0 date D2 limit all daemons 1\n"+
		"a 4\tpass\t30.0\nb 4\tfail\t5.0\nhang 4\tfail\t180.0\n")
	out := renderHas(t, dir, Causes{"mpich-coll (1 daemon)/b 4": "why"},
		"| MPICH test/mpi coll (Open MPI, <= 4 ranks) | 4 daemons | 3 | 2 | not run | - | 300 | not run | - | - |",
		"| MPICH test/mpi coll (Open MPI, <= 4 ranks) | 1 daemon | 3 | 2 | 1 | 1 | 300 | 330 | 1.10x (met) | 10 / 30 (3.00x, 1 tests) |",
		"| mpich-coll (1 daemon) | b 4 | why |",
		"smartt-1d mpich-coll D2 (1 daemons)")
	if strings.Contains(out, "| 1 daemon | not run") {
		t.Errorf("a deployment never measured has rows:\n%s", out)
	}
}

// NetPIPE: min / median / max per provider, the latency goal is at most 1.5x, the
// bandwidth goal at least 1x; a failed point (0) counts in the spread.
func TestRenderNetPIPE(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "netpipe.tsv"), "# round\tprovider\tbytes\tMbps\tusec\tdate D\n"+
		"1\ttcp\t8\t0.1\t10\n1\tsmartt\t8\t0.1\t14\n2\ttcp\t8\t0.1\t12\n2\tsmartt\t8\t0.1\t20\n3\ttcp\t8\t0.1\t11\n3\tsmartt\t8\t0.1\t16\n"+
		"1\ttcp\t1048576\t1000\t1\n1\tsmartt\t1048576\t900\t1\n"+
		"1\ttcp\t16777216\t1000\t1\n1\tsmartt\t16777216\t0\t0\n2\tsmartt\t16777216\t1200\t1\n3\tsmartt\t16777216\t1300\t1\n")
	renderHas(t, dir, nil,
		"3 rounds, D;",
		"| metric | tcp | smartt, 4 daemons | ratio of medians | goal |",
		"| latency at 8 B (us) | 10.0 / 11.0 / 12.0 | 14.0 / 16.0 / 20.0 | 1.45x (met) | <= 1.5x tcp |",
		"| bandwidth at 1 MiB (Mbit/s) | 1000.0 / 1000.0 / 1000.0 | 900.0 / 900.0 / 900.0 | 0.90x (**not met**) | >= tcp |",
		"| bandwidth at 16 MiB (Mbit/s) | 1000.0 / 1000.0 / 1000.0 | 0.0 / 1200.0 / 1300.0 | 1.20x (met) | >= tcp |")
	// A one-daemon deployment measured in the same rounds gets its own columns.
	write(t, filepath.Join(dir, "netpipe.tsv"), "# round\tprovider\tbytes\tMbps\tusec\tdate D\n"+
		"1\ttcp\t8\t0.1\t10\n1\tsmartt\t8\t0.1\t40\n1\tsmartt-1d\t8\t0.1\t12\n")
	renderHas(t, dir, nil, "| metric | tcp | smartt, 4 daemons | ratio of medians | smartt, 1 daemon | ratio of medians | goal |",
		"| latency at 8 B (us) | 10.0 / 10.0 / 10.0 | 40.0 / 40.0 / 40.0 | 4.00x (**not met**) | 12.0 / 12.0 / 12.0 | 1.20x (met) | <= 1.5x tcp |",
		"| bandwidth at 1 MiB (Mbit/s) | not run | not run | - | not run | - | >= tcp |")
}

// Malformed stored data is an error naming the file and line, never a silently short table.
func TestReadRunRejects(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"status":  "a\tok\t1\n",
		"fields":  "a\tpass\n",
		"seconds": "a\tpass\tx\n",
		"dup":     "a\tpass\t1\na\tfail\t1\n",
		"wall":    "# wall_s nan? date D\n",
	} {
		p := filepath.Join(dir, name+".tsv")
		write(t, p, text)
		if _, err := ReadRun(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: err = %v, want an error naming %s", name, err, p)
		}
	}
	if r, err := ReadRun(filepath.Join(dir, "absent.tsv")); r != nil || err != nil {
		t.Errorf("absent file: %v, %v; want not run", r, err)
	}
	p := filepath.Join(dir, "causes.tsv")
	write(t, p, "# c\npt2pt\tx\n")
	if _, err := ReadCauses(p); err == nil {
		t.Error("a cause line without a cause was accepted")
	}
}
