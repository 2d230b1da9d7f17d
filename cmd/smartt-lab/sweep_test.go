package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sweepScen = `name: sweep-cli
topology: {kind: fattree2, hosts: 16, radix: 8, link_rate: 100Gbit, link_latency: 500ns, switch_latency: 500ns}
transport: {max_retransmits: 255}
workload: {kind: permutation, size: 64KiB}
`

// A local sweep and the same sweep run as separate jobs (as a job array would) and merged
// give the same table, byte for byte.
func TestSimSweepLocalAndJobArray(t *testing.T) {
	dir := t.TempDir()
	scen := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(scen, []byte(sweepScen), 0o644); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(dir, "local")
	axes := []string{scen, "-set", "transport.lb=ecmp,ops", "-set", "topology.oversubscription=1,2", "-seeds", "2"}
	var out, errb bytes.Buffer
	if err := runSweep(simSweep, append(axes, "-j", "2", "-plots", "svg", "-out", local), &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), "| ops | 2 | 2 |") || strings.Count(errb.String(), "] job ") != 8 {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	}
	for _, f := range []string{"sweep.csv", "sweep.json", "sweep_completion_rel.svg", "runs/job-000007.json"} {
		if st, err := os.Stat(filepath.Join(local, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	// -cdf draws one FCT CDF per value of the other axis; -pivot with an explicit -show
	// prints one comparison table per metric.
	out.Reset()
	if err := runSweep(simSweep, []string{"-merge", local, "-out", filepath.Join(dir, "cdf"), "-plots", "png", "-cdf", "transport.lb",
		"-pivot", "transport.lb", "-show", "completion_rel,fct.spread_ns"}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	for _, f := range []string{"fct_cdf_1.png", "fct_cdf_2.png"} {
		if st, err := os.Stat(filepath.Join(dir, "cdf", f)); err != nil || st.Size() < 1000 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if !strings.Contains(out.String(), "completion_rel by transport.lb") || !strings.Contains(out.String(), "fct.spread_ns by transport.lb") {
		t.Fatalf("pivot tables:\n%s", out.String())
	}
	// A sweep over part of the grid takes the runs it needs from the first (-reuse) and
	// runs nothing.
	out.Reset()
	errb.Reset()
	if err := runSweep(simSweep, []string{scen, "-set", "topology.oversubscription=2", "-set", "transport.lb=ops,ecmp", "-seeds", "2",
		"-reuse", local, "-plots", "none", "-out", filepath.Join(dir, "part")}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if strings.Count(errb.String(), "] job ") != 0 || !strings.Contains(errb.String(), "4 runs taken from") || !strings.Contains(out.String(), "| 2 | ops | 2 |") {
		t.Fatalf("-reuse: stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	}
	csvLocal, _ := os.ReadFile(filepath.Join(local, "sweep.csv"))
	if n := strings.Count(string(csvLocal), "\n"); n != 5 {
		t.Fatalf("%d CSV lines:\n%s", n, csvLocal)
	}

	// The job array: one command per run, each run on its own, then a merge.
	arr := filepath.Join(dir, "array")
	out.Reset()
	if err := runSweep(simSweep, append(axes, "-out", arr, "-print-jobs", "-emit", filepath.Join(dir, "jobs.txt")), &out, &errb); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	emitted, _ := os.ReadFile(filepath.Join(dir, "jobs.txt"))
	if len(lines) != 8 || string(emitted) != out.String() || !strings.Contains(errb.String(), "--array=0-7") {
		t.Fatalf("jobs:\n%s\n%s", out.String(), errb.String())
	}
	for i, l := range lines {
		f := strings.Fields(l)
		if f[0] != "smartt-lab" || f[1] != "sim" || f[2] != "sweep" || f[len(f)-2] != "-job" || f[len(f)-1] != []string{"0", "1", "2", "3", "4", "5", "6", "7"}[i] {
			t.Fatalf("job line %q", l)
		}
		if err := runSweep(simSweep, append(f[3:], "-progress=false"), &out, &errb); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
	}
	if _, err := os.Stat(filepath.Join(arr, "sweep.csv")); err == nil {
		t.Fatal("a single job wrote the table")
	}
	out.Reset()
	if err := runSweep(simSweep, []string{"-merge", arr, "-plots", "none"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	csvArr, _ := os.ReadFile(filepath.Join(arr, "sweep.csv"))
	if !bytes.Equal(csvLocal, csvArr) {
		t.Fatalf("local and job-array tables differ:\n%s\n%s", csvLocal, csvArr)
	}
	// A merge with a job missing names it.
	if err := os.Remove(filepath.Join(arr, "runs", "job-000005.json")); err != nil {
		t.Fatal(err)
	}
	if err := runSweep(simSweep, []string{"-merge", arr}, &out, &errb); err == nil || !strings.Contains(err.Error(), "missing: 5") {
		t.Fatalf("merge with a job missing: %v", err)
	}
	// -resume runs only the missing job.
	errb.Reset()
	if err := runSweep(simSweep, append(axes, "-out", arr, "-resume", "-plots", "none"), &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errb.String(), "8 runs, 1 to run") {
		t.Fatalf("resume: %s", errb.String())
	}
}

func TestSimSweepErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"permutation_128", "-set", "topology.nosuch=1", "-out", dir}, "nosuch"},
		{[]string{"permutation_128", "-set", "topology.hosts=many", "-out", dir}, "topology.hosts"},
		{[]string{"permutation_128", "-set", "transport.cc", "-out", dir}, "FIELD=VALUE"},
		{[]string{"nosuch_scenario", "-out", dir}, "permutation_128"},
		{[]string{"permutation_128"}, "-out DIR is required"},
		{[]string{"permutation_128", "-out", dir, "-job", "1"}, "-job 1: the sweep has jobs 0..0"},
		{[]string{"permutation_128", "-out", dir, "-plots", "gif"}, "-plots"},
		{[]string{"permutation_128", "-set", "transport.cc=smartt", "-out", dir, "-cdf", "transport.lb"}, "-cdf transport.lb: not an axis"},
		{[]string{"-merge", filepath.Join(dir, "empty")}, "no run files"},
	} {
		var out, errb bytes.Buffer
		err := runSweep(simSweep, c.args, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
}
