package mpifabric

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/netbed"
	"github.com/smartt-transport/smartt/test/sim"
)

// One MPI job across the fabric over smartt with leaf0-spine1 failing mid-run: it
// completes with checked results, the failure is seen by the switches (frames sent into
// the dead link) and every namespace, the management one included, is gone afterwards.
// Needs root, Open MPI (mpicc, mpirun) and the provider (scripts/build-native); the
// test command runs it after building them with SMARTT_MPI_FABRIC=1, which turns a
// missing prerequisite into a failure instead of a skip.
func TestRunAcrossFailure(t *testing.T) {
	skip := t.Skip
	if os.Getenv("SMARTT_MPI_FABRIC") == "1" {
		skip = t.Fatal
	}
	if testing.Short() {
		t.Skip("-short: an MPI job on the testbed takes about a minute")
	}
	if os.Geteuid() != 0 {
		skip("needs root (network namespaces)")
	}
	prov, _ := filepath.Abs(filepath.Join("..", "..", "build", "native", "lib", "libfabric"))
	if _, err := os.Stat(filepath.Join(prov, "libsmartt-fi.so")); err != nil {
		skip("no build/native/lib/libfabric/libsmartt-fi.so (scripts/build-native)")
	}
	if _, err := exec.LookPath("mpirun"); err != nil {
		skip("no mpirun (openmpi-bin)")
	}
	bench := filepath.Join(t.TempDir(), "mpi_coll")
	if out, err := exec.Command("mpicc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2",
		filepath.Join("..", "..", "native", "mpibench", "mpi_coll.c"), "-o", bench).CombinedOutput(); err != nil {
		skip(fmt.Sprintf("mpicc: %v %s", err, out))
	}
	sc, err := sim.LoadScenario("fabric.yaml")
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("mf%x", rand.Uint32())
	t.Cleanup(func() { _ = netbed.Remove(name) })
	o := Options{Name: name, Bench: bench, ProviderPath: prov, Ops: []Op{{"alltoall", 128 << 10}}, Iters: 4,
		FailLink: "leaf0-spine1", FailAfter: 0, Converge: 300 * time.Millisecond, Timeout: 3 * time.Minute}
	rows, st, err := Run(sc, 7, Smartt, Failed, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Status != StatusOK || rows[0].Seconds <= 0 {
		t.Fatalf("rows %+v", rows)
	}
	if len(st) != 1 || st[0].Op != "alltoall" || st[0].DownDrops == 0 {
		t.Errorf("no frames went into the failed link before convergence: %+v", st)
	}
	if left, _ := netbed.Namespaces(name); len(left) != 0 {
		t.Errorf("namespaces left: %v", left)
	}
}
