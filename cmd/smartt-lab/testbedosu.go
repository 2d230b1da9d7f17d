package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/test/mpifabric"
	"github.com/smartt-transport/smartt/test/netbed"
	"github.com/smartt-transport/smartt/test/results"
	"github.com/smartt-transport/smartt/transport"
)

// osuOpts are the flags of "testbed osu" besides mpifabric.Options.
type osuOpts struct {
	ccs, sizes, seeds, out, render string
}

// bindTestbedOSU: "testbed osu" is the RL-CC paper's Fig. 9 on the testbed: MPI_Alltoall
// (mpi_coll, one rank per host) per message size over smartt with each controller on a
// healthy fabric, per seed, and prints the region rlcc-fig9 of docs/rlcc.md.
func bindTestbedOSU(fs *pflag.FlagSet) cli.RunFunc {
	var o mpifabric.Options
	var f osuOpts
	fs.StringVar(&o.Name, "name", "osu", "testbed name: namespaces are smartt-<name>-<node> (removed afterwards)")
	fs.StringVar(&o.Bench, "bench", "build/native/tests/mpi_coll", "the mpi_coll binary (native/mpibench/mpi_coll.c)")
	fs.StringVar(&o.ProviderPath, "provider-path", "build/native/lib/libfabric", "FI_PROVIDER_PATH: the directory of libsmartt-fi.so")
	fs.StringVar(&f.ccs, "cc", "dcqcn,swift,rlcc", "the daemons' controllers, comma-separated (one testbed per controller and seed)")
	fs.StringVar(&f.sizes, "sizes", "32,1KiB,8KiB,64KiB,256KiB", "MPI_Alltoall bytes per rank pair, comma-separated (multiples of 8, 8..64MiB)")
	fs.StringVar(&f.seeds, "seeds", "1,2,3", "seeds, comma-separated (the switches' ECMP salts and the daemons' randomness)")
	fs.IntVar(&o.Iters, "iters", 20, "timed rounds per size (1..1000)")
	fs.DurationVar(&o.Timeout, "timeout", 120*time.Second, "wall-time bound of one MPI job")
	fs.StringVar(&f.out, "out", "", "write the rows as TSV here (docs/rlcc/fig9.tsv)")
	fs.StringVar(&f.render, "render", "", "run nothing: print the table of this TSV (what -out wrote)")
	return func(args []string, stdout io.Writer) error {
		if f.render != "" {
			return renderTSV(f.render, "rlcc-fig9", mpifabric.OSUBodyOfTSV, stdout)
		}
		if len(args) != 1 {
			return cli.Usagef("testbed osu: want one scenario (test/mpifabric/fabric.yaml), or -render TSV")
		}
		return runOSU(args[0], o, f, stdout)
	}
}

// runOSU runs every controller at every seed, interleaved (each seed's controllers
// before the next seed), writes the TSV and prints the region.
func runOSU(scenario string, o mpifabric.Options, f osuOpts, stdout io.Writer) error {
	sc, err := loadScenario(scenario)
	if err != nil {
		return err
	}
	var sizes []int64
	for _, s := range strings.Split(f.sizes, ",") {
		b, err := cli.ParseSize(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("sizes: %w", err)
		}
		sizes = append(sizes, b)
		o.Ops = append(o.Ops, mpifabric.Op{Name: "alltoall", Bytes: b})
	}
	seedList, err := parseSeeds(f.seeds)
	if err != nil {
		return err
	}
	if err := o.Check(); err != nil { // before the first testbed
		return err
	}
	for _, c := range strings.Split(f.ccs, ",") {
		if _, ok := transport.LookupCC(c); !ok {
			return fmt.Errorf("cc: %q is not a controller (%s)", c, strings.Join(transport.CCNames(), ", "))
		}
	}
	done, err := prepareBed(&o)
	if err != nil {
		return err
	}
	defer done()
	var rows []mpifabric.Row
	var stats []mpifabric.Stats
	for _, seed := range seedList {
		for _, c := range strings.Split(f.ccs, ",") {
			rs, st, err := mpifabric.RunOSU(sc, seed, c, sizes, o)
			rows, stats = append(rows, rs...), append(stats, st...)
			if err != nil {
				return fmt.Errorf("seed %d cc %s: %w", seed, c, err)
			}
		}
	}
	note := fmt.Sprintf("scenario %s; %d ranks, one per host; healthy; iters %d; controllers %s; %s",
		sc.Name, sc.Topology.Hosts, o.Iters, f.ccs, time.Now().UTC().Format("2006-01-02T15:04Z"))
	return emitRuns(stdout, "rlcc-fig9", f.out, note, rows, stats, mpifabric.OSUBodyOfTSV)
}

// renderTSV prints region name's table of the runs stored at path.
func renderTSV(path, name string, body func(io.Reader) (string, error), stdout io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := body(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	results.Emit(stdout, name, b)
	return nil
}

// emitRuns writes the runs as TSV to out (when set) and prints region name's table of
// the stored rows, so -render of the file prints the same.
func emitRuns(stdout io.Writer, name, out, note string, rows []mpifabric.Row, stats []mpifabric.Stats,
	body func(io.Reader) (string, error)) error {
	var tsv bytes.Buffer
	if err := mpifabric.WriteTSV(&tsv, note, rows, stats); err != nil {
		return err
	}
	if out != "" {
		if err := os.WriteFile(out, tsv.Bytes(), 0o644); err != nil {
			return err
		}
	}
	b, err := body(bytes.NewReader(tsv.Bytes()))
	if err != nil {
		return err
	}
	results.Emit(stdout, name, b)
	return nil
}

// prepareBed makes o's binaries' paths absolute (the jobs run in the hosts' namespaces),
// creates the testbeds' state directory, logs to stderr and removes the testbed named
// o.Name on SIGINT or SIGTERM until the returned function is called.
func prepareBed(o *mpifabric.Options) (func(), error) {
	for _, p := range []*string{&o.Bench, &o.ProviderPath} {
		a, err := filepath.Abs(*p)
		if err != nil {
			return nil, err
		}
		*p = a
	}
	if err := os.MkdirAll(netbed.StateDir, 0o755); err != nil {
		return nil, err
	}
	o.Log = os.Stderr
	return removeOnSignal(o.Name), nil
}

// removeOnSignal removes the testbed name on SIGINT or SIGTERM before exiting; the
// returned function stops watching.
func removeOnSignal(name string) func() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		if _, ok := <-sig; ok {
			fmt.Fprintf(os.Stderr, "testbed: interrupted; removing testbed %s\n", name)
			_ = netbed.Remove(name)
			os.Exit(130)
		}
	}()
	return func() { signal.Stop(sig) }
}
