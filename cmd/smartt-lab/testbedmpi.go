package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/test/mpifabric"
)

// bindTestbedMPI: "testbed mpi" runs MPI_Alltoall and MPI_Allreduce (mpi_coll) across an
// emulated fabric over the smartt and tcp libfabric providers, healthy, with a failed link
// (rerouted after -converge, or at once) and on one spine, per seed, and prints the table
// of docs/results/mpi.md (test/mpifabric).
func bindTestbedMPI(fs *pflag.FlagSet) cli.RunFunc {
	var o mpifabric.Options
	fs.StringVar(&o.Name, "name", "mpi", "testbed name: namespaces are smartt-<name>-<node> (removed afterwards)")
	fs.StringVar(&o.Bench, "bench", "build/native/tests/mpi_coll", "the mpi_coll binary (native/mpibench/mpi_coll.c)")
	fs.StringVar(&o.ProviderPath, "provider-path", "build/native/lib/libfabric", "FI_PROVIDER_PATH: the directory of libsmartt-fi.so")
	seeds := fs.String("seeds", "1,2,3", "seeds, comma-separated (the switches' ECMP salts and the daemons' randomness)")
	provs := fs.String("providers", "tcp,smartt", "libfabric providers, comma-separated: tcp, smartt")
	conds := fs.String("conditions", strings.Join(mpifabric.Conditions, ","),
		"conditions, comma-separated: healthy, failed, failed-now (rerouted at once), one-spine (healthy, spines: 1)")
	var a2a, ared int64
	cli.SizeVar(fs, &a2a, "alltoall", 256<<10, 0, 64<<20, "MPI_Alltoall bytes per rank pair (0: not run)")
	cli.SizeVar(fs, &ared, "allreduce", 1<<20, 0, 64<<20, "MPI_Allreduce bytes per rank (0: not run)")
	fs.IntVar(&o.Iters, "iters", 6, "timed rounds per operation (1..1000)")
	fs.StringVar(&o.FailLink, "fail-link", "leaf0-spine1", "the link that fails (condition failed)")
	fs.DurationVar(&o.FailAfter, "fail-after", 100*time.Millisecond, "from the job's ready line (after an untimed round) to the failure")
	fs.DurationVar(&o.Converge, "converge", time.Second, "from the failure until the switches route around it")
	fs.DurationVar(&o.Timeout, "timeout", 120*time.Second, "wall-time bound of one MPI job")
	out := fs.String("out", "", "write the rows as TSV here (docs/results/mpi/fabric.tsv)")
	render := fs.String("render", "", "run nothing: print the table of this TSV (what -out wrote)")
	return func(args []string, stdout io.Writer) error {
		if *render != "" {
			return renderTSV(*render, "mpi-fabric", mpifabric.BodyOfTSV, stdout)
		}
		if len(args) != 1 {
			return cli.Usagef("testbed mpi: want one scenario (test/mpifabric/fabric.yaml), or -render TSV")
		}
		sc, err := loadScenario(args[0])
		if err != nil {
			return err
		}
		for _, op := range []mpifabric.Op{{Name: "alltoall", Bytes: a2a}, {Name: "allreduce", Bytes: ared}} {
			if op.Bytes > 0 {
				o.Ops = append(o.Ops, op)
			}
		}
		seedList, err := parseSeeds(*seeds)
		if err != nil {
			return err
		}
		// Checked before the first testbed, not after an hour of runs.
		for _, c := range strings.Split(*conds, ",") {
			if !slices.Contains(mpifabric.Conditions, c) {
				return fmt.Errorf("conditions: %q, want some of %s", c, strings.Join(mpifabric.Conditions, ","))
			}
		}
		// Interrupted: end the jobs and remove the namespaces before going.
		done, err := prepareBed(&o)
		if err != nil {
			return err
		}
		defer done()
		var rows []mpifabric.Row
		var stats []mpifabric.Stats
		// Interleaved: every provider and condition of a seed before the next seed, so a
		// change of the shared machine's load falls on all of them.
		for _, seed := range seedList {
			for _, cond := range strings.Split(*conds, ",") {
				for _, prov := range strings.Split(*provs, ",") {
					rs, st, err := mpifabric.Run(sc, seed, prov, cond, o)
					rows = append(rows, rs...)
					stats = append(stats, st...)
					if err != nil {
						return fmt.Errorf("seed %d %s %s: %w", seed, prov, cond, err)
					}
				}
			}
		}
		note := fmt.Sprintf("scenario %s; %d ranks; iters %d; fail %s %v after ready, converge %v later (failed-now: at once); one-spine: spines 1; timeout %v; %s",
			sc.Name, sc.Topology.Hosts, o.Iters, o.FailLink, o.FailAfter, o.Converge, o.Timeout, time.Now().UTC().Format("2006-01-02T15:04Z"))
		return emitRuns(stdout, "mpi-fabric", *out, note, rows, stats, mpifabric.BodyOfTSV)
	}
}

// parseSeeds reads a comma-separated list of seeds.
func parseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("seeds: %q: %w", f, err)
		}
		out = append(out, v)
	}
	if len(out) == 0 || len(out) > 100 {
		return nil, fmt.Errorf("seeds: %d, want 1..100", len(out))
	}
	return out, nil
}
