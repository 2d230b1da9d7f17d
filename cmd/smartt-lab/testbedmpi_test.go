package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/test/mpifabric"
)

// "testbed mpi" wants a scenario unless it renders; -render prints the region of stored
// rows without running anything; seeds are checked before any testbed is built.
func TestTestbedMPIFlags(t *testing.T) {
	if _, err := execute("testbed", "mpi"); err == nil || !cli.IsUsageError(err) {
		t.Errorf("no scenario: %v", err)
	}
	if _, err := execute("testbed", "mpi", "-seeds", "1,x", "../../test/mpifabric/fabric.yaml"); err == nil || !strings.Contains(err.Error(), "seeds") {
		t.Errorf("bad seed: %v", err)
	}
	if _, err := execute("testbed", "mpi", "-conditions", "healthy,flaky", "../../test/mpifabric/fabric.yaml"); err == nil || !strings.Contains(err.Error(), "flaky") {
		t.Errorf("bad condition: %v", err)
	}
	var tsv bytes.Buffer
	rows := []mpifabric.Row{{Seed: 1, Provider: "tcp", Condition: "healthy", Op: "alltoall", Bytes: 1024, Iters: 2, Seconds: 1, Status: "ok"}}
	if err := mpifabric.WriteTSV(&tsv, "a note; fail leaf0-spine1 0s", rows, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "fabric.tsv")
	if err := os.WriteFile(path, tsv.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := execute("testbed", "mpi", "-render", path)
	if err != nil || !strings.HasPrefix(out, "<!-- results:mpi-fabric -->\n") ||
		!strings.Contains(out, "| MPI_Alltoall, 1 KiB per rank pair | healthy | 500 / 500 / 500 | not run | - |") {
		t.Fatalf("render: %v\n%s", err, out)
	}
}

// Seeds: 1 to 100 of them, each a number.
func TestParseSeeds(t *testing.T) {
	if s, err := parseSeeds("1, 2,3"); err != nil || len(s) != 3 || s[2] != 3 {
		t.Errorf("1,2,3: %v %v", s, err)
	}
	hundred := strings.Repeat("1,", 99) + "1"
	if _, err := parseSeeds(hundred); err != nil {
		t.Errorf("100 seeds: %v", err)
	}
	for _, bad := range []string{"", "-1", hundred + ",1"} {
		if _, err := parseSeeds(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
