// Package mpifabric runs MPI collectives across the netns testbed's emulated leaf-spine
// fabric (test/bedrun: userspace switches with the port model, a smartt daemon per host):
// native/mpibench/mpi_coll times and checks MPI_Alltoall and MPI_Allreduce, through Open
// MPI's ofi MTL over the smartt libfabric provider and over libfabric's tcp provider,
// healthy and with a fabric link failing mid-run, over several seeds; it keeps the
// results as TSV rows and renders the table of docs/results/mpi.md.
package mpifabric

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/smartt-transport/smartt/test/bedrun"
	"github.com/smartt-transport/smartt/test/netbed"
	"github.com/smartt-transport/smartt/test/sim"
	"github.com/smartt-transport/smartt/transport"
)

// Providers and conditions a run takes.
const (
	Smartt  = "smartt"
	TCP     = "tcp"
	Healthy = "healthy"
	Failed  = "failed"
	// FailedNow is Failed with the switches routing around the link at once (no
	// Options.Converge): only the failure's lasting loss of a spine, not its first second.
	FailedNow = "failed-now"
	// OneSpine is healthy on the fabric with a single spine: every leaf's cross traffic
	// on one uplink each way, as after FailedNow's reroute but for every leaf.
	OneSpine = "one-spine"
)

// Conditions are the conditions a run takes, in the table's order.
var Conditions = []string{Healthy, Failed, FailedNow, OneSpine}

// Job statuses.
const (
	StatusOK      = "ok"
	StatusTimeout = "timeout" // not done within Options.Timeout: killed
	StatusWrong   = "wrong"   // completed with wrong elements
	StatusError   = "error"   // mpirun failed before a result
)

// Op is one timed collective: "alltoall" (Bytes per rank pair) or "allreduce" (Bytes per
// rank).
type Op struct {
	Name  string
	Bytes int64
}

// Options steer the runs.
type Options struct {
	Name         string        // testbed name (namespaces smartt-<name>-*)
	Bench        string        // the mpi_coll binary
	ProviderPath string        // FI_PROVIDER_PATH: the directory of libsmartt-fi.so
	Ops          []Op          // one MPI job each
	Iters        int           // timed rounds per job (1..1000)
	FailLink     string        // the link that fails (condition failed)
	FailAfter    time.Duration // from the job's "ready" line to the failure
	Converge     time.Duration // from the failure until the switches route around it
	Timeout      time.Duration // per MPI job
	CC           string        // the smartt daemons' controller ("": the scenario's)
	Log          io.Writer     // progress (nil: none)
}

// Row is one MPI job's result.
type Row struct {
	Seed      uint64
	Provider  string
	Condition string
	Op        string
	Bytes     int64
	Iters     int
	Seconds   float64 // the slowest rank's time for Iters rounds; 0 unless Status is ok
	Status    string
}

// Stats are one MPI job's fabric and daemon counters (taken before and after the job).
type Stats struct {
	Seed      uint64
	Provider  string
	Condition string
	Op        string
	Drops     uint64  // frames the switch queues dropped
	Trims     uint64  // smartt DATA frames trimmed to headers
	Marks     uint64  // frames ECN-marked
	DownDrops uint64  // frames sent into the failed link before the switches routed around it
	RetxSack  uint64  // smartt retransmissions after a SACK gap
	RetxNack  uint64  // smartt retransmissions after a NACK (a trimmed frame)
	RetxRTO   uint64  // smartt retransmissions on timeout (tcp's are not counted here)
	DupData   uint64  // smartt DATA received twice (a retransmission that was not needed)
	UpShare   float64 // bytes the leaves sent to their busiest spine over all they sent to spines
}

// Check validates o.
func (o *Options) Check() error {
	if o.Iters < 1 || o.Iters > 1000 {
		return fmt.Errorf("iterations %d: want 1..1000", o.Iters)
	}
	if len(o.Ops) == 0 {
		return errors.New("no operations")
	}
	for _, op := range o.Ops {
		if op.Name != "alltoall" && op.Name != "allreduce" {
			return fmt.Errorf("operation %q: want alltoall or allreduce", op.Name)
		}
		if op.Bytes < 8 || op.Bytes%8 != 0 || op.Bytes > 64<<20 {
			return fmt.Errorf("%s size %d: want a multiple of 8 in 8..64MiB (mpi_coll's limits)", op.Name, op.Bytes)
		}
	}
	if o.Timeout <= 0 || o.Timeout > time.Hour {
		return fmt.Errorf("timeout %v: want (0, 1h]", o.Timeout)
	}
	if o.FailAfter < 0 || o.Converge < 0 {
		return errors.New("fail-after and converge must be >= 0")
	}
	return nil
}

func (o *Options) logf(format string, a ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, "mpifabric: "+format+"\n", a...)
	}
}

// Run runs every operation of o as one MPI job each (4 ranks, one per host) on a fresh
// testbed for sc at seed (the switches' ECMP salts, the daemons' randomness), over
// provider, under condition; the testbed is removed afterwards. It returns each job's row
// and counters.
func Run(sc *sim.Scenario, seed uint64, provider, condition string, o Options) ([]Row, []Stats, error) {
	if err := o.Check(); err != nil {
		return nil, nil, err
	}
	if provider != Smartt && provider != TCP {
		return nil, nil, fmt.Errorf("provider %q: want smartt or tcp", provider)
	}
	if !slices.Contains(Conditions, condition) {
		return nil, nil, fmt.Errorf("condition %q: want one of %s", condition, strings.Join(Conditions, ", "))
	}
	s := *sc
	s.Seed = seed
	if provider == Smartt && o.CC != "" {
		s.Transport.CC = o.CC
	}
	fail := condition == Failed || condition == FailedNow
	switch condition {
	case FailedNow:
		o.Converge = 0
	case OneSpine:
		s.Topology.Spines = 1
	}
	var rows []Row
	var stats []Stats
	before := func(r *bedrun.Run) error {
		if fail && r.TB.Plan.LinkIndex(o.FailLink) < 0 {
			return fmt.Errorf("no link %q", o.FailLink)
		}
		if err := addMgmt(r.TB); err != nil {
			return err
		}
		dir, err := os.MkdirTemp("", "smartt-mpifabric-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		socks := make([]string, len(r.Daemons))
		for i, d := range r.Daemons {
			socks[i] = d.Config.API.Socket
		}
		if err := writeLaunch(dir, r.TB.Name, r.TB.Plan, socks); err != nil {
			return err
		}
		for _, op := range o.Ops {
			row := Row{Seed: seed, Provider: provider, Condition: condition, Op: op.Name, Bytes: op.Bytes, Iters: o.Iters}
			st := Stats{Seed: seed, Provider: provider, Condition: condition, Op: op.Name}
			c0, err := snapshot(r)
			if err != nil {
				return err
			}
			j := &job{r: r, o: &o, dir: dir, row: &row, fail: fail}
			if err := j.run(); err != nil {
				return err
			}
			c1, err := snapshot(r)
			if err != nil {
				return err
			}
			desc := st.fill(c0, c1)
			o.logf("seed %d %s %s %s %d B: %s %.3f s; %s", seed, provider, condition, op.Name, op.Bytes, row.Status, row.Seconds, desc)
			rows = append(rows, row)
			stats = append(stats, st)
		}
		return nil
	}
	// The scenario's own workload (a small permutation) runs after the MPI jobs, the
	// failed link restored: a check that the fabric and the daemons still carry traffic.
	_, err := bedrun.Execute(&s, bedrun.Options{Name: o.Name, Timeout: 60 * time.Second, Before: before})
	return rows, stats, err
}

// counters are the switches' and daemons' counters at one moment of a run.
type counters struct {
	ports []netbed.PortCounters
	hosts transport.Stats // summed over the daemons
}

// snapshot reads the run's counters (each switch's on its own thread).
func snapshot(r *bedrun.Run) (counters, error) {
	ps, err := r.Fabric.LiveCounters()
	if err != nil {
		return counters{}, err
	}
	c := counters{ports: ps}
	for _, d := range r.Daemons {
		st := d.Node.Stats()
		c.hosts.RetxSack += st.RetxSack
		c.hosts.RetxNack += st.RetxNack
		c.hosts.RetxTimeout += st.RetxTimeout
		c.hosts.DupData += st.DupData
	}
	return c, nil
}

// fill sets s's counters to what happened between a and b (the same run, b later), and
// describes the leaves' uplink bytes.
func (s *Stats) fill(a, b counters) string {
	ports := slices.Clone(b.ports)
	for i := range ports {
		p, q := &ports[i], a.ports[i]
		s.Drops += p.Model.Drops + p.Truncated - q.Model.Drops - q.Truncated
		s.Trims += p.Model.Trims - q.Model.Trims
		s.Marks += p.Model.Marks - q.Model.Marks
		s.DownDrops += p.TxErrors - q.TxErrors
		p.TxBytes -= q.TxBytes
	}
	s.RetxSack = b.hosts.RetxSack - a.hosts.RetxSack
	s.RetxNack = b.hosts.RetxNack - a.hosts.RetxNack
	s.RetxRTO = b.hosts.RetxTimeout - a.hosts.RetxTimeout
	s.DupData = b.hosts.DupData - a.hosts.DupData
	var desc string
	s.UpShare, desc = uplinks(ports)
	return fmt.Sprintf("switches: drops %d, trims %d, marks %d, into down links %d; leaf uplink bytes %s; daemons: retx sack %d nack %d timeout %d, dup data %d",
		s.Drops, s.Trims, s.Marks, s.DownDrops, desc, s.RetxSack, s.RetxNack, s.RetxRTO, s.DupData)
}

// uplinks returns the share of the leaves' bytes to spines that went to each leaf's
// busiest spine (1/spines when even), and the bytes per uplink, "leaf0-spine0 12.3M ...".
func uplinks(ps []netbed.PortCounters) (float64, string) {
	var b strings.Builder
	busiest := map[string]uint64{}
	var total, top uint64
	for _, p := range ps {
		if strings.HasPrefix(p.Switch, "leaf") && strings.HasPrefix(p.Peer, "spine") {
			fmt.Fprintf(&b, " %s-%s %.1fM", p.Switch, p.Peer, float64(p.TxBytes)/1e6)
			total += p.TxBytes
			busiest[p.Switch] = max(busiest[p.Switch], p.TxBytes)
		}
	}
	for _, v := range busiest {
		top += v
	}
	if total == 0 {
		return 0, "none"
	}
	return float64(top) / float64(total), strings.TrimSpace(b.String())
}

// job is one MPI job of a run.
type job struct {
	r    *bedrun.Run
	o    *Options
	dir  string
	row  *Row
	fail bool
}

// mpirunArgs is the mpirun command line of a job: one rank per host (the hostfile names
// the hosts by management address, the agent enters each host's namespace), ORTE's
// out-of-band traffic on the management network, Open MPI's ofi MTL over provider, ranks
// yielding the CPU when idle (the shared machine has fewer cores than ranks, daemons and
// switches).
func mpirunArgs(dir, provider, bench string, op Op, iters int) []string {
	return []string{"--allow-run-as-root", "--hostfile", filepath.Join(dir, "hosts"), "--map-by", "node",
		"-np", strconv.Itoa(len(readHosts(dir))),
		"--mca", "plm_rsh_agent", filepath.Join(dir, "agent"), "--mca", "plm_rsh_no_tree_spawn", "1",
		"--mca", "oob_tcp_if_include", MgmtPrefix.String(),
		"--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", provider,
		"--mca", "btl", "self,vader", "--mca", "mpi_yield_when_idle", "1", "-x", "FI_PROVIDER_PATH", "-x", "FI_TCP_IFACE",
		bench, op.Name, strconv.Itoa(iters), strconv.FormatInt(op.Bytes, 10)}
}

// readHosts returns the hostfile's lines (the ranks).
func readHosts(dir string) []string {
	b, _ := os.ReadFile(filepath.Join(dir, "hosts"))
	return strings.Fields(strings.ReplaceAll(string(b), " slots=1", ""))
}

// run runs the job, filling its row; an error is a broken testbed, not a failed job.
func (j *job) run() error {
	o := j.o
	op := Op{Name: j.row.Op, Bytes: j.row.Bytes}
	cmd := exec.Command("mpirun", mpirunArgs(j.dir, j.row.Provider, o.Bench, op, o.Iters)...)
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
		"FI_PROVIDER_PATH="+o.ProviderPath, "FI_TCP_IFACE=eth0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := netbed.Do(j.r.TB.Ns(MgmtNode), cmd.Start); err != nil {
		return fmt.Errorf("mpirun: %w", err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	f := &failer{tb: j.r.TB, fab: j.r.Fabric, link: o.FailLink, stop: make(chan struct{})}
	deadline := time.NewTimer(o.Timeout)
	defer deadline.Stop()
	status := ""
loop:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				break loop
			}
			if j.fail && strings.HasPrefix(l, "mpi_coll: ready") {
				f.start(o.FailAfter, o.Converge)
			}
			if st := j.parse(l); st != "" {
				status = st
			}
		case <-deadline.C:
			status = StatusTimeout
			kill := stopGroup(cmd)
			defer kill.Stop()
			drain(lines, 15*time.Second)
			break loop
		}
	}
	werr := cmd.Wait()
	ferr := f.end()
	switch {
	case status == "" && werr != nil:
		status = StatusError
		o.logf("mpirun: %v: %s", werr, tail(stderr.String(), 600))
	case status == "":
		status = StatusError
	}
	if status != StatusOK {
		j.row.Seconds = 0
	}
	j.row.Status = status
	return ferr
}

// parse reads one line of mpi_coll's output into the row; it returns the status the line
// settles, or "".
func (j *job) parse(l string) string {
	f := strings.Fields(strings.TrimPrefix(l, "mpi_coll: "))
	switch {
	case len(f) == 4 && f[0] == j.row.Op:
		if s, err := strconv.ParseFloat(f[3], 64); err == nil && f[1] == strconv.FormatInt(j.row.Bytes, 10) && s >= 0 {
			j.row.Seconds = s
		}
	case len(f) == 1 && f[0] == "ok" && j.row.Seconds > 0:
		return StatusOK
	case len(f) > 0 && f[0] == "FAILED":
		return StatusWrong
	}
	return ""
}

// stopGroup ends mpirun's process group: SIGTERM (mpirun then ends its orteds and
// ranks), SIGKILL 10 s later unless the returned timer is stopped first; what is left in
// the hosts' namespaces ends with the testbed.
func stopGroup(cmd *exec.Cmd) *time.Timer {
	pg := -cmd.Process.Pid
	_ = syscall.Kill(pg, syscall.SIGTERM)
	return time.AfterFunc(10*time.Second, func() { _ = syscall.Kill(pg, syscall.SIGKILL) })
}

// drain reads lines until the channel closes or d has passed.
func drain(lines <-chan string, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case _, ok := <-lines:
			if !ok {
				return
			}
		case <-t.C:
			return
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
