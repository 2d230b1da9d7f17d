package mpifabric

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/test/sim"
)

// Fig. 9's table: per size, each controller's median over the seeds divided by the lowest
// median of that size; a job that did not complete is left out and counted; the counters
// keep each size apart.
func TestRenderOSU(t *testing.T) {
	rows := []Row{
		{Seed: 1, Provider: "dcqcn", Op: "alltoall", Bytes: 32, Iters: 10, Seconds: 0.040, Status: StatusOK},
		{Seed: 2, Provider: "dcqcn", Op: "alltoall", Bytes: 32, Iters: 10, Seconds: 0.060, Status: StatusOK},
		{Seed: 3, Provider: "dcqcn", Op: "alltoall", Bytes: 32, Iters: 10, Status: StatusTimeout},
		{Seed: 1, Provider: "rlcc", Op: "alltoall", Bytes: 32, Iters: 10, Seconds: 0.020, Status: StatusOK},
		{Seed: 1, Provider: "dcqcn", Op: "alltoall", Bytes: 1024, Iters: 10, Seconds: 0.100, Status: StatusOK},
		{Seed: 1, Provider: "rlcc", Op: "alltoall", Bytes: 1024, Iters: 10, Seconds: 0.300, Status: StatusOK},
	}
	got := RenderOSU(rows)
	for _, want := range []string{
		"| 32 B | 2.50 (5000; 4000-6000) (1 of 3 not completed) | 1.00 (2000; 2000-2000) | rlcc |",
		"| 1 KiB | 1.00 (10000; 10000-10000) | 3.00 (30000; 30000-30000) | dcqcn |",
		"3 seeds",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	stats := []Stats{
		{Provider: "rlcc", Op: "alltoall/1024", Trims: 7, Marks: 1},
		{Provider: "rlcc", Op: "alltoall/32", Trims: 1, RetxRTO: 2},
		{Provider: "rlcc", Op: "alltoall/32", Trims: 3, RetxRTO: 4},
	}
	st := RenderOSUStats(stats)
	i32, i1k := strings.Index(st, "| 32 B | rlcc | 0 | 2 | 0 | 3 |"), strings.Index(st, "| 1 KiB | rlcc | 0 | 7 | 1 | 0 |")
	if i32 < 0 || i1k < i32 {
		t.Errorf("counters by size, ascending:\n%s", st)
	}
}

// RunOSU refuses no controller before touching the machine, and an invalid size the
// same way Run does.
func TestRunOSURefuses(t *testing.T) {
	if _, _, err := RunOSU(&sim.Scenario{}, 1, "", []int64{8}, okOptions()); err == nil {
		t.Error("no controller accepted")
	}
	if _, _, err := RunOSU(&sim.Scenario{}, 1, "rlcc", []int64{12}, okOptions()); err == nil {
		t.Error("size 12 accepted")
	}
}

// docs/rlcc.md shows docs/rlcc/fig9.tsv: the region rlcc-fig9 is the stored runs
// rendered.
func TestOSUPageMatchesTSV(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "rlcc", "fig9.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	body, err := OSUBodyOfTSV(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "rlcc.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), body) {
		t.Fatalf("docs/rlcc.md (region rlcc-fig9) does not show docs/rlcc/fig9.tsv; rerun scripts/rlcc-osu or\n"+
			"  go run ./cmd/smartt-lab testbed osu -render docs/rlcc/fig9.tsv\nwant:\n%s", body)
	}
}
