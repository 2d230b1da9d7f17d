package mpifabric

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/netbed"
	"github.com/smartt-transport/smartt/test/sim"
)

func okOptions() Options {
	return Options{Ops: []Op{{"alltoall", 8}}, Iters: 1, Timeout: time.Second}
}

// Every limit of Options at and beyond it.
func TestOptionsLimits(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Options)
		ok   bool
	}{
		{"base", func(*Options) {}, true},
		{"iters 0", func(o *Options) { o.Iters = 0 }, false},
		{"iters 1000", func(o *Options) { o.Iters = 1000 }, true},
		{"iters 1001", func(o *Options) { o.Iters = 1001 }, false},
		{"no ops", func(o *Options) { o.Ops = nil }, false},
		{"op name", func(o *Options) { o.Ops = []Op{{"bcast", 8}} }, false},
		{"size 0", func(o *Options) { o.Ops = []Op{{"allreduce", 0}} }, false},
		{"size 12", func(o *Options) { o.Ops = []Op{{"allreduce", 12}} }, false},
		{"size 64MiB", func(o *Options) { o.Ops = []Op{{"allreduce", 64 << 20}} }, true},
		{"size 64MiB+8", func(o *Options) { o.Ops = []Op{{"allreduce", 64<<20 + 8}} }, false},
		{"timeout 0", func(o *Options) { o.Timeout = 0 }, false},
		{"timeout 1h", func(o *Options) { o.Timeout = time.Hour }, true},
		{"timeout 1h+", func(o *Options) { o.Timeout = time.Hour + 1 }, false},
		{"converge < 0", func(o *Options) { o.Converge = -1 }, false},
	}
	for _, c := range cases {
		o := okOptions()
		c.mod(&o)
		if err := o.Check(); (err == nil) != c.ok {
			t.Errorf("%s: Check() = %v, want ok %v", c.name, err, c.ok)
		}
	}
}

// A job is ok only with its own operation's time line and then "ok"; other sizes,
// operations and malformed lines are ignored; FAILED is a wrong result.
func TestParse(t *testing.T) {
	j := &job{row: &Row{Op: "alltoall", Bytes: 262144}}
	for _, l := range []string{"mpi_coll: ok", "mpi_coll: ready 4 ranks", "mpi_coll: allreduce 262144 4 9.0",
		"mpi_coll: alltoall 65536 4 9.0", "mpi_coll: alltoall 262144 4 -1", "mpi_coll: alltoall 262144 4 x", "noise"} {
		if st := j.parse(l); st != "" || j.row.Seconds != 0 {
			t.Fatalf("%q: status %q seconds %v, want nothing", l, st, j.row.Seconds)
		}
	}
	if st := j.parse("mpi_coll: alltoall 262144 4 1.25"); st != "" || j.row.Seconds != 1.25 {
		t.Fatalf("time line: status %q seconds %v", st, j.row.Seconds)
	}
	if st := j.parse("mpi_coll: ok"); st != StatusOK {
		t.Fatalf("ok line: %q", st)
	}
	if st := j.parse("mpi_coll: FAILED 3 wrong elements"); st != StatusWrong {
		t.Fatalf("FAILED line: %q", st)
	}
}

// The hostfile names every host by its management address; the agent maps each to its
// namespace and daemon socket, is valid sh, and refuses to quote what it cannot.
func TestWriteLaunch(t *testing.T) {
	p, err := netbed.NewPlan(netbed.Spec{Kind: netbed.KindLeafSpine, Leaves: 2, Spines: 2, HostsPerLeaf: 2, Mode: netbed.ModeEmulated})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	socks := []string{"/s/h0.sock", "/s/h1.sock", "/s/h2.sock", "/s/h3.sock"}
	if err := writeLaunch(dir, "tb", p, socks); err != nil {
		t.Fatal(err)
	}
	if got := readHosts(dir); !slices.Equal(got, []string{"192.168.77.1", "192.168.77.2", "192.168.77.3", "192.168.77.4"}) {
		t.Fatalf("hosts %v", got)
	}
	agent, _ := os.ReadFile(filepath.Join(dir, "agent"))
	for _, want := range []string{"192.168.77.3) ns='" + filepath.Join(netbed.NsDir, "smartt-tb-h2") + "' sock='/s/h2.sock'", "exec nsenter --net="} {
		if !strings.Contains(string(agent), want) {
			t.Errorf("agent lacks %q:\n%s", want, agent)
		}
	}
	if out, err := exec.Command("sh", "-n", filepath.Join(dir, "agent")).CombinedOutput(); err != nil {
		t.Fatalf("agent is not valid sh: %v %s", err, out)
	}
	if out, err := exec.Command(filepath.Join(dir, "agent"), "10.9.9.9", "true").CombinedOutput(); err == nil || !strings.Contains(string(out), "unknown host") {
		t.Fatalf("agent for an unknown host: %v %s", err, out)
	}
	if err := writeLaunch(dir, "tb", p, []string{"a", "b", "c", "d'"}); err == nil {
		t.Fatal("a quote in a socket path was accepted")
	}
	if err := writeLaunch(dir, "tb", p, socks[:3]); err == nil {
		t.Fatal("3 sockets for 4 hosts accepted")
	}
	args := strings.Join(mpirunArgs(dir, "smartt", "/b/mpi_coll", Op{"allreduce", 1024}, 3), " ")
	for _, want := range []string{"-np 4", "mtl_ofi_provider_include smartt", "oob_tcp_if_include 192.168.77.0/24",
		"mpi_yield_when_idle 1", "/b/mpi_coll allreduce 3 1024"} {
		if !strings.Contains(args, want) {
			t.Errorf("mpirun args lack %q: %s", want, args)
		}
	}
}

type fakeFabric struct {
	mu    sync.Mutex
	calls []string
	err   error
}

func (f *fakeFabric) add(s string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
	return f.err
}
func (f *fakeFabric) LinkDown(l string) error { return f.add("down " + l) }
func (f *fakeFabric) LinkUp(l string) error   { return f.add("up " + l) }
func (f *fakeFabric) Converge(l string, down bool) error {
	if down {
		return f.add("converge " + l)
	}
	return f.add("unconverge " + l)
}

// The failer fails, converges, and restores in that order; a job that ends before the
// failure leaves the link alone; a second start is ignored; errors come out of end.
func TestFailer(t *testing.T) {
	ff := &fakeFabric{}
	f := &failer{tb: ff, fab: ff, link: "l", stop: make(chan struct{})}
	f.start(0, 0)
	f.start(0, 0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ff.mu.Lock()
		n := len(ff.calls)
		ff.mu.Unlock()
		if n == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := f.end(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"down l", "converge l", "up l", "unconverge l"}; !slices.Equal(ff.calls, want) {
		t.Fatalf("calls %v, want %v", ff.calls, want)
	}
	ff = &fakeFabric{}
	f = &failer{tb: ff, fab: ff, link: "l", stop: make(chan struct{})}
	f.start(time.Hour, 0)
	if err := f.end(); err != nil || len(ff.calls) != 0 {
		t.Fatalf("ended before the failure: calls %v err %v", ff.calls, err)
	}
	ff = &fakeFabric{err: errors.New("boom")}
	f = &failer{tb: ff, fab: ff, link: "l", stop: make(chan struct{})}
	f.start(0, time.Hour)
	time.Sleep(10 * time.Millisecond)
	if err := f.end(); err == nil {
		t.Fatal("a failing LinkDown was not reported")
	}
}

// Rows and stats survive the TSV; broken lines are refused.
func TestTSV(t *testing.T) {
	rows := []Row{{1, TCP, Healthy, "alltoall", 1024, 4, 1.5, StatusOK}, {2, Smartt, Failed, "allreduce", 8, 1, 0, StatusTimeout}}
	stats := []Stats{{1, TCP, Healthy, "alltoall", 5, 0, 0, 0, 0, 0, 0, 0, 0.75}, {3, Smartt, FailedNow, "allreduce", 0, 1, 2, 3, 4, 5, 6, 7, 0.5}}
	var b bytes.Buffer
	if err := WriteTSV(&b, "note; fail leaf0-spine1 100ms", rows, stats); err != nil {
		t.Fatal(err)
	}
	note, r2, s2, err := ReadTSV(bytes.NewReader(b.Bytes()))
	if err != nil || note != "note; fail leaf0-spine1 100ms" || !slices.Equal(r2, rows) || !slices.Equal(s2, stats) {
		t.Fatalf("round trip: %q %v %v %v", note, r2, s2, err)
	}
	if err := WriteTSV(&b, "two\nlines", nil, nil); err == nil {
		t.Fatal("a two-line note was accepted")
	}
	for _, bad := range []string{"", tsvHeader + "\n1\ttcp\thealthy\talltoall\t8\t0\t1\tok\n", tsvHeader + "\nx\ttcp\n",
		tsvHeader + "\n" + statsHeader + "\n1\ttcp\thealthy\talltoall\t1\t2\t3\t4\t5\t6\t7\t8\t1.5\n",
		tsvHeader + "\n" + statsHeader + "\n1\ttcp\thealthy\t1\t2\t3\t4\t5\t0.5\n"} {
		if _, _, _, err := ReadTSV(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// The table gives min / median / max of ms per operation over completed runs, counts the
// others beside them, and the ratio of the medians.
func TestRender(t *testing.T) {
	var rows []Row
	for i, s := range []float64{4, 2, 3} {
		rows = append(rows, Row{uint64(i), TCP, Failed, "alltoall", 1 << 20, 2, s, StatusOK})
	}
	rows = append(rows, Row{1, Smartt, Failed, "alltoall", 1 << 20, 2, 1, StatusOK}, Row{2, Smartt, Failed, "alltoall", 1 << 20, 2, 0, StatusTimeout},
		Row{1, Smartt, Healthy, "alltoall", 1 << 20, 2, 1, StatusOK})
	out := Render(rows, "leaf0-spine1")
	for _, want := range []string{
		"| MPI_Alltoall, 1 MiB per rank pair | healthy | not run | 500 / 500 / 500 | - |",
		"| MPI_Alltoall, 1 MiB per rank pair | leaf0-spine1 fails | 1000 / 1500 / 2000 | 500 / 500 / 500 (timeout in 1 of 2) | 0.33x |",
		"3 seeds",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if lo, med, hi := Spread([]float64{3, 1, 2, 10}); lo != 1 || med != 2.5 || hi != 10 {
		t.Errorf("Spread = %v %v %v", lo, med, hi)
	}
	st := RenderStats([]Stats{{1, TCP, Healthy, "alltoall", 5, 0, 0, 0, 0, 0, 0, 0, 0.75}, {2, TCP, Healthy, "alltoall", 7, 0, 0, 0, 0, 0, 0, 0, 0.65},
		{3, TCP, Healthy, "alltoall", 9, 0, 0, 0, 0, 0, 0, 0, 0.5}, {1, Smartt, OneSpine, "alltoall", 0, 1, 2, 0, 3, 4, 5, 6, 1},
		{1, Smartt, FailedNow, "alltoall", 0, 1, 2, 3, 4, 5, 6, 7, 0.9}, {1, Smartt, Healthy, "allreduce", 0, 0, 0, 0, 0, 0, 0, 0, 0.5}}, "l")
	want := []string{
		"| MPI_Allreduce | healthy | smartt | 0 | 0 | 0 | 0 | 0 / 0 / 0 | 0 | 0.50 |",
		"| MPI_Alltoall | healthy | tcp | 7 | 0 | 0 | 0 | 0 / 0 / 0 | 0 | 0.65 |",
		"| MPI_Alltoall | l fails, rerouted at once | smartt | 0 | 1 | 2 | 3 | 4 / 5 / 6 | 7 | 0.90 |",
		"| MPI_Alltoall | one spine, healthy | smartt | 0 | 1 | 2 | 0 | 3 / 4 / 5 | 6 | 1.00 |",
	}
	// In that order: operation, then condition in Conditions' order.
	last := -1
	for _, w := range want {
		i := strings.Index(st, w)
		if i <= last {
			t.Errorf("%q at %d (previous at %d) in\n%s", w, i, last, st)
		}
		last = i
	}
}

// The page shows what the stored runs say: docs/results/mpi/fabric.tsv rendered is the
// body of the region mpi-fabric (whose stamp, checked by TestDocsStamps, guards its
// command and inputs).
func TestPageMatchesTSV(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "docs", "results", "mpi", "fabric.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	body, err := BodyOfTSV(f)
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "results", "mpi.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), body) {
		t.Fatalf("docs/results/mpi.md (region mpi-fabric) does not show docs/results/mpi/fabric.tsv; rerun scripts/mpi-fabric or\n"+
			"  go run ./cmd/smartt-lab testbed mpi -render docs/results/mpi/fabric.tsv x\nwant:\n%s", body)
	}
}

// Each job's counters are the difference of the snapshots around it: switch drops
// (queue and truncated), trims, marks and refused sends summed over ports, the daemons'
// retransmissions and duplicates, and the uplink share of the job's own bytes only.
func TestStatsFill(t *testing.T) {
	port := func(sw, peer string, tx, drops, trunc, trims, marks, txErr uint64) netbed.PortCounters {
		p := netbed.PortCounters{Switch: sw, Peer: peer}
		p.TxBytes, p.Truncated, p.TxErrors = tx, trunc, txErr
		p.Model.Drops, p.Model.Trims, p.Model.Marks = drops, trims, marks
		return p
	}
	var a, b counters
	a.ports = []netbed.PortCounters{port("leaf0", "spine0", 100, 1, 0, 2, 3, 4), port("leaf0", "spine1", 900, 0, 1, 0, 0, 0)}
	b.ports = []netbed.PortCounters{port("leaf0", "spine0", 400, 3, 0, 5, 7, 9), port("leaf0", "spine1", 1000, 0, 2, 0, 1, 0)}
	a.hosts.RetxSack, a.hosts.RetxNack, a.hosts.RetxTimeout, a.hosts.DupData = 1, 2, 3, 4
	b.hosts.RetxSack, b.hosts.RetxNack, b.hosts.RetxTimeout, b.hosts.DupData = 11, 22, 33, 44
	var s Stats
	s.fill(a, b)
	want := Stats{Drops: 3, Trims: 3, Marks: 5, DownDrops: 5, RetxSack: 10, RetxNack: 20, RetxRTO: 30, DupData: 40, UpShare: 0.75}
	if s != want {
		t.Fatalf("fill = %+v, want %+v", s, want)
	}
	if b.ports[0].TxBytes != 400 {
		t.Fatal("fill changed the later snapshot")
	}
}

// Run refuses an unknown provider or condition before touching the machine; every
// listed condition has its own name in the table.
func TestRunRefuses(t *testing.T) {
	sc := &sim.Scenario{}
	for _, c := range [][2]string{{"udp", Healthy}, {Smartt, "flaky"}, {Smartt, ""}} {
		if _, _, err := Run(sc, 1, c[0], c[1], okOptions()); err == nil {
			t.Errorf("Run(%q, %q) accepted", c[0], c[1])
		}
	}
	seen := map[string]bool{}
	for _, c := range Conditions {
		n := condName(c, "l")
		if seen[n] {
			t.Errorf("condition %s: name %q taken", c, n)
		}
		seen[n] = true
	}
}
