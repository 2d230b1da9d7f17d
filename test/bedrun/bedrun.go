// Package bedrun runs a simulator scenario (test/sim's YAML format) on a netns testbed
// (test/netbed): it builds the fabric, runs the emulated switches with test/switchport's
// port model, starts the real daemon (transport/smarttd) in every host namespace, drives
// the workload through the client library, applies the scheduled failures and reports
// the simulator's result types plus switch and daemon counters.
package bedrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/reps"
	"github.com/smartt-transport/smartt/test/netbed"
	"github.com/smartt-transport/smartt/test/sim"
	"github.com/smartt-transport/smartt/test/switchport"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// Port is the daemons' UDP port on every host.
const Port = smarttd.DefaultPort

// DefaultTrimDSCP is the DSCP of trimmed frames when the scenario's transport gives none.
const DefaultTrimDSCP = 46

// Mapped is a scenario translated for the testbed.
type Mapped struct {
	Spec      netbed.Spec
	Model     netbed.PortModel
	Transport transport.Config
	Flows     []sim.FlowResult // Src, Dst, Size, Start filled in
}

// Map translates a scenario: topology (single → star, leafspine, fattree2 → leafspine;
// the switches tor<i> are leaf<i>), queues (switchport's config in testbed wire bytes),
// the transport (base_rtt and min_rto scaled to the testbed when the scenario leaves them
// 0) and the workload's flows.
func Map(sc *sim.Scenario) (*Mapped, error) {
	tc := sc.Topology
	m := &Mapped{}
	rate := tc.LinkRate
	if rate == 0 {
		return nil, errors.New("topology.link_rate: must be set for the testbed (a few hundred Mbit/s to 1Gbit here)")
	}
	if rate > 5e9 {
		return nil, fmt.Errorf("topology.link_rate = %v: the userspace switch forwards about 1 Gbit/s here; at most 5Gbit", rate)
	}
	s := netbed.Spec{Mode: netbed.ModeEmulated, LinkRate: rate}
	switch tc.Kind {
	case "single":
		s.Kind, s.Hosts = netbed.KindStar, tc.Hosts
	case "leafspine":
		if tc.Leaves < 1 || tc.Hosts%tc.Leaves != 0 {
			return nil, fmt.Errorf("topology: hosts (%d) must split evenly over leaves (%d)", tc.Hosts, tc.Leaves)
		}
		s.Kind, s.Leaves, s.Spines, s.HostsPerLeaf = netbed.KindLeafSpine, tc.Leaves, tc.Spines, tc.Hosts/tc.Leaves
		// The simulator runs every link at link_rate: so does the testbed.
		s.Oversubscription = float64(s.HostsPerLeaf) / float64(s.Spines)
	case "fattree2":
		half := tc.Radix / 2
		o := max(tc.Oversubscription, 1)
		if half < 1 || tc.Hosts%half != 0 || half%o != 0 {
			return nil, fmt.Errorf("topology: fattree2 needs hosts (%d) a multiple of radix/2 (%d) and radix/2 a multiple of oversubscription (%d)", tc.Hosts, half, o)
		}
		s.Kind, s.Leaves, s.Spines, s.HostsPerLeaf = netbed.KindLeafSpine, tc.Hosts/half, half/o, half
		s.Oversubscription = float64(o)
	default:
		return nil, fmt.Errorf("topology.kind = %q: the testbed runs single, leafspine and fattree2", tc.Kind)
	}
	var err error
	if m.Spec, err = s.Normalize(); err != nil {
		return nil, err
	}
	// Longest path: host-leaf-spine-leaf-host (4 links), or 2 on a star.
	links := 4
	if s.Kind == netbed.KindStar {
		links = 2
	}
	mtu := sc.Transport.MTU
	frame := int64(mtu + 14 + 20 + 8 + 24)
	ser := frame * 8 * 1e9 / int64(rate)
	q := tc.Queue
	bytes := q.Bytes
	if bytes == 0 {
		bdps := q.BDPs
		if bdps == 0 {
			bdps = 1
		}
		// The testbed's RTT is dominated by the switches' and kernel's per-hop cost, so
		// size the queue on a BDP of that RTT, at least 8 full frames.
		bytes = max(int(bdps*float64(rate)/8*float64(testbedRTT(links, ser))/1e9), 8*int(frame))
	}
	kmin, kmax := q.Kmin, q.Kmax
	if kmin == 0 && kmax == 0 {
		kmin, kmax = 0.2, 0.8
	}
	m.Model = netbed.PortModel{DataBytes: bytes, ControlBytes: q.ControlBytes, Trim: q.Trim == nil || *q.Trim,
		ReturnToSender: q.ReturnToSender, Delay: int64(tc.LinkLatency), Seed: sc.Seed}
	if m.Model.ControlBytes == 0 {
		m.Model.ControlBytes = bytes
	}
	if !q.NoECN {
		m.Model.KminBytes, m.Model.KmaxBytes = switchport.RED(bytes, kmin, kmax)
	}
	t := sc.Transport
	// The emulated switches stamp in-band telemetry (as the simulator's) unless the
	// scenario says they cannot; a controller that needs it turns it on.
	if reg, ok := transport.LookupCC(t.CC); ok && reg.Needs.INT {
		if q.NoINT {
			return nil, fmt.Errorf("topology.queue.no_int = true: transport.cc = %q needs switches that stamp in-band telemetry", t.CC)
		}
		t.INT = true
	}
	if t.INT && q.NoINT {
		return nil, errors.New("transport.int = true with topology.queue.no_int = true: the switches stamp no telemetry")
	}
	m.Model.INT = t.INT
	t.LinkRate = rate
	t.Trimming = m.Model.Trim
	t.ReturnToSender = m.Model.ReturnToSender && m.Model.Trim // the daemons read what the switches return
	if t.TrimDSCP == 0 {
		t.TrimDSCP = DefaultTrimDSCP
	}
	m.Model.TrimDSCP = t.TrimDSCP
	if t.BaseRTT == 0 {
		t.BaseRTT = config.Duration(testbedRTT(links, ser))
	}
	// The scenario's RTOs are tuned to the simulator's microsecond RTTs: keep them at least
	// 20 base RTTs and 5 ms, beyond the testbed's scheduling hiccups.
	t.MinRTO = max(t.MinRTO, 20*t.BaseRTT, config.Duration(5*time.Millisecond))
	t.InitialRTO = max(t.InitialRTO, t.MinRTO)
	t.MaxRTO = max(t.MaxRTO, 4*t.MinRTO)
	// REPS's freezing lasts a fixed time tuned to microsecond fabrics (1 ms by default,
	// hundreds of simulated RTTs): keep it at least 10 testbed base RTTs.
	t.REPS.FreezeDuration = max(t.REPS.FreezeDuration, 10*t.BaseRTT)
	// The scenario is the simulator's, whose engine sprays per packet: reps.run auto would
	// give the daemons GSO-sized runs (ResolveRun); keep the simulator's 1.
	if t.REPS.Run == reps.RunAuto {
		t.REPS.Run = 1
	}
	m.Transport = t
	hosts := m.Spec.Hosts
	if m.Spec.Kind != netbed.KindStar {
		hosts = m.Spec.Leaves * m.Spec.HostsPerLeaf
	}
	if m.Flows, err = flows(sc, hosts); err != nil {
		return nil, err
	}
	return m, nil
}

// testbedRTT is a base RTT for the testbed: serialisation of a full frame per link both
// ways plus about 60 µs per userspace-switch hop and kernel crossing each way (measured
// on this machine's veths; see docs/testbed.md).
func testbedRTT(links int, ser int64) int64 {
	return int64(links)*ser + int64(links)*2*60_000
}

// flows lays out the workload: incast, permutation, tornado, all_to_all (one message per
// ordered pair). Starts are offsets from the run's start, jittered as the scenario says.
func flows(sc *sim.Scenario, hosts int) ([]sim.FlowResult, error) {
	w := sc.Workload
	if w.Size <= 0 {
		return nil, fmt.Errorf("workload.size = %d: must be > 0", w.Size)
	}
	rng := rand.New(rand.NewPCG(sc.Seed, 0x7e57bed))
	var fs []sim.FlowResult
	add := func(s, d int) { fs = append(fs, sim.FlowResult{Src: s, Dst: d, Size: int64(w.Size)}) }
	switch w.Kind {
	case "incast":
		if w.Receiver < 0 || w.Receiver >= hosts {
			return nil, fmt.Errorf("workload.receiver = %d: want 0..%d", w.Receiver, hosts-1)
		}
		n := w.Senders
		if n == 0 {
			n = hosts - 1
		}
		if n < 1 || n > hosts-1 {
			return nil, fmt.Errorf("workload.senders = %d: want 1..%d", n, hosts-1)
		}
		for h := 0; len(fs) < n; h++ {
			if h != w.Receiver {
				add(h, w.Receiver)
			}
		}
	case "permutation":
		// A random derangement: every host sends to one other and receives from one.
		p := rng.Perm(hosts)
		for i := range p {
			add(p[i], p[(i+1)%hosts])
		}
	case "tornado":
		for h := range hosts {
			add(h, (h+hosts/2)%hosts)
		}
	case "all_to_all":
		for s := range hosts {
			for d := range hosts {
				if s != d {
					add(s, d)
				}
			}
		}
	case "ring_allreduce", "butterfly_allreduce":
		var err error
		if fs, err = allReduce(sc, hosts); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("workload.kind = %q: the testbed runs incast, permutation, tornado, all_to_all, ring_allreduce and butterfly_allreduce", w.Kind)
	}
	for i := range fs {
		if w.Jitter > 0 && fs[i].Phase == 0 {
			fs[i].Start = rng.Int64N(int64(w.Jitter) + 1)
		}
	}
	return fs, nil
}

// Options steer a run.
type Options struct {
	Name    string        // testbed name (namespaces smartt-<name>-*); default "run"
	Timeout time.Duration // wall-time bound of the workload (default 60 s)
	Log     *slog.Logger  // daemon logs (default: discarded)
	// Before, if set, is called with the testbed and fabric up, daemons running, before
	// the workload starts.
	Before func(r *Run) error
	// Control, if set, is a unix socket path where the run takes faults while the
	// workload runs (smartt-lab testbed fail; see Control and ParseFault).
	Control string
	// Pcap, if set, is a directory for one pcap file per captured link (PcapLinks, or
	// every link), at most PcapMax bytes each (0: 4 MiB), the first PcapSnap bytes (0: 128)
	// of every frame.
	Pcap              string
	PcapLinks         []string
	PcapMax, PcapSnap int
}

// Run is a testbed run in progress: what the scenario's hooks can reach.
type Run struct {
	TB      *netbed.Testbed
	Fabric  *netbed.Fabric
	Daemons []*smarttd.Daemon // per host
	Addrs   []netip.AddrPort  // per host
	Mapped  *Mapped
	// Scenario is the scenario being run.
	Scenario *sim.Scenario
	faults   faults
	control  string
	dir      string // the daemons' API sockets
	// fabStopped: the run stopped its fabric itself (newRun's release leaves it).
	fabStopped bool
	log        *slog.Logger    // the daemons' logs
	parent     []int           // per flow: the flow whose arrival starts it, -1: none
	released   []chan struct{} // per flow: closed when it arrived (or failed)
	once       []sync.Once
	start      time.Time
}

// Report is what a run measured.
type Report struct {
	Result  *sim.Result           // the simulator's summary and per-flow results
	Ports   []netbed.PortCounters // every switch port (switch and model counters)
	Hosts   []transport.Stats     // every daemon's engine counters
	Quick   uint64                // SMaRTT QuickAdapt firings over live connections
	Base    int64                 // the transport's base RTT, ns
	Refused map[string]uint64     // per failed link: DATA frames the switches sent into it after it failed
	// SampleLate is the largest delay of a queue sample behind its time (switch loop wake-ups).
	SampleLate time.Duration
	Pcaps      []netbed.CaptureStats // the pcap files written
	Start      time.Time             // the workload's time zero (flow starts, samples, failures)
}

// Execute runs sc on a fresh testbed and removes the testbed afterwards.
func Execute(sc *sim.Scenario, o Options) (*Report, error) {
	m, err := Map(sc)
	if err != nil {
		return nil, err
	}
	if o.Name == "" {
		o.Name = "run"
	}
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	tb, err := netbed.Up(o.Name, m.Spec)
	if err != nil {
		return nil, err
	}
	defer tb.Down()
	fo := netbed.FabricOptions{}
	if fo.Sample, err = sampleOptions(sc, tb); err != nil {
		return nil, err
	}
	if o.Pcap != "" {
		for _, l := range o.PcapLinks {
			if tb.Plan.LinkIndex(l) < 0 {
				return nil, fmt.Errorf("pcap: no link %q", l)
			}
		}
		fo.Capture = &netbed.CaptureOptions{Links: o.PcapLinks, Max: o.PcapMax, Snap: o.PcapSnap}
	}
	fab, err := tb.RunFabricWith(m.Model, fo)
	if err != nil {
		return nil, err
	}
	r, release, err := newRun(&Run{TB: tb, Fabric: fab, Mapped: m, Scenario: sc, control: o.Control, log: o.Log}, "smartt-bed-")
	defer release()
	if err != nil {
		return nil, err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, d := range r.Daemons {
			d.Shutdown(ctx)
		}
	}()
	for i := range tb.Plan.Hosts() {
		d, err := r.startDaemon(i, sc.Seed+uint64(i), nil)
		if err != nil {
			return nil, err
		}
		r.Daemons = append(r.Daemons, d)
		r.Addrs = append(r.Addrs, d.Config.Listen)
	}
	if o.Before != nil {
		if err := o.Before(r); err != nil {
			return nil, err
		}
	}
	res, refused, err := r.drive(sc, o.Timeout)
	if err != nil {
		return nil, err
	}
	rep := &Report{Result: res, Refused: refused, Base: int64(m.Transport.BaseRTT), Start: r.start}
	for _, d := range r.Daemons {
		st := d.Node.Stats()
		rep.Hosts = append(rep.Hosts, st)
		for _, ci := range d.Node.Conns(nil) {
			rep.Quick += ci.QuickAdapts
			res.FreezeEpisodes += ci.FreezeEpisodes
		}
		res.PacketsSent += st.PacketsSent
		res.DataSent += st.DataSent
		res.RetxSack += st.RetxSack
		res.RetxNack += st.RetxNack
		res.RetxTimeout += st.RetxTimeout
		res.NacksSent += st.NacksSent
		res.CEEchoed += st.CEEchoed
		res.DupData += st.DupData
	}
	r.fabStopped = true
	if err := fab.Stop(); err != nil {
		return nil, fmt.Errorf("switches: %w", err)
	}
	rep.Ports = fab.Counters()
	var smp []netbed.QueueSamples
	smp, rep.SampleLate = fab.Samples()
	res.Samples = series(smp)
	if o.Pcap != "" {
		if rep.Pcaps, err = fab.WritePcaps(o.Pcap); err != nil {
			return rep, fmt.Errorf("pcap: %w", err)
		}
	}
	for _, p := range rep.Ports {
		res.FlakyDrops += p.Lost
		res.Drops += p.Model.Drops + p.Truncated // frames too long for the switch are lost too
		res.Trims += p.Model.Trims
		res.Marks += p.Model.Marks
		res.MaxQueue = max(res.MaxQueue, p.Model.MaxDataBytes)
		res.LinkDrops += p.TxErrors
	}
	return rep, nil
}

// startDaemon starts the daemon of host i (i-th of Plan.Hosts) in its namespace: listen on
// the host's address and Port, API socket in the run's directory, the mapped transport.
// open, if set, opens its socket layer (the soak wraps the UDP one to crash it).
func (r *Run) startDaemon(i int, seed uint64, open func(cfg *smarttd.Config, log *slog.Logger) (*smarttd.SocketLayer, error)) (*smarttd.Daemon, error) {
	n := r.TB.Plan.Hosts()[i]
	node := r.TB.Plan.Nodes[n]
	cfg := smarttd.DefaultConfig()
	cfg.Listen = netip.AddrPortFrom(node.Addr, Port)
	cfg.API.Socket = filepath.Join(r.dir, node.Name+".sock")
	cfg.Transport = r.Mapped.Transport
	var d *smarttd.Daemon
	if err := netbed.DoHandle(r.TB.NsHandle(n), func() (err error) {
		d, err = smarttd.Start(cfg, smarttd.Options{Logger: r.log, Seed: seed, OpenSocket: open})
		return err
	}); err != nil {
		return nil, fmt.Errorf("daemon on %s: %w", node.Name, err)
	}
	return d, nil
}

// drive runs the workload: a client session per host, every flow's message sent at its
// start offset, completion (last ACK, from the daemon) and receive times recorded.
func (r *Run) drive(sc *sim.Scenario, timeout time.Duration) (*sim.Result, map[string]uint64, error) {
	m := r.Mapped
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	sess := make([]*client.Session, len(r.Daemons))
	for i, d := range r.Daemons {
		s, err := client.New(d.Config.API.Socket).Open(ctx)
		if err != nil {
			return nil, nil, err
		}
		defer s.Close()
		if _, err := s.Bind(ctx, 1); err != nil {
			return nil, nil, err
		}
		sess[i] = s
	}
	fl := slices.Clone(m.Flows)
	expect := make([]int, len(sess))
	hostOf := map[netip.AddrPort]int{}
	for i, a := range r.Addrs {
		hostOf[a] = i
	}
	for i := range fl {
		fl[i].FCT, fl[i].RxTime = -1, -1
		expect[fl[i].Dst]++
	}
	// Each flow's first 8 bytes carry its index, so the receiver can time it.
	payload := func(i int) []byte {
		b := make([]byte, fl[i].Size)
		for j := range b {
			b[j] = byte(j*7 + i)
		}
		if len(b) >= 8 {
			b[0], b[1], b[2], b[3] = byte(i), byte(i>>8), byte(i>>16), 0xbe
		}
		return b
	}
	r.deps(fl)
	start := time.Now()
	r.start = start
	if err := r.Fabric.StartSampling(start); err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		cancel()
	}
	for h, s := range sess {
		if expect[h] == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range expect[h] {
				msg, err := s.Recv(ctx)
				if err != nil {
					fail(fmt.Errorf("host %d receive: %w", h, err))
					return
				}
				t := time.Since(start).Nanoseconds()
				if len(msg.Data) < 8 || msg.Data[3] != 0xbe {
					continue
				}
				i := int(msg.Data[0]) | int(msg.Data[1])<<8 | int(msg.Data[2])<<16
				mu.Lock()
				if i < len(fl) && !slices.Equal(msg.Data, payload(i)) {
					errs = append(errs, fmt.Errorf("flow %d: message corrupted", i))
				} else if i < len(fl) {
					fl[i].RxTime = t - fl[i].Start
					r.release(i)
				}
				mu.Unlock()
			}
		}()
	}
	// Failures at their times, and from the control socket while the workload runs.
	if err := r.scheduleFailures(ctx, start, sc); err != nil {
		return nil, nil, err
	}
	if r.control != "" {
		stop, err := r.serveControl(r.control)
		if err != nil {
			return nil, nil, err
		}
		defer stop()
	}
	r.launch(ctx, start, fl, sess, payload, &mu, &wg, &errs)
	wg.Wait()
	end := time.Since(start).Nanoseconds()
	cancel()
	refused, ferr := r.endFailures()
	mu.Lock()
	defer mu.Unlock()
	errs = append(errs, ferr)
	res := &sim.Result{Scenario: sc.Name, Topology: describe(m), Workload: sc.Workload.Kind, Seed: sc.Seed,
		Hosts: len(r.Daemons), CC: m.Transport.CC, LB: m.Transport.LB, Flows: len(fl), SimTime: end,
		WallSeconds: float64(end) / 1e9, PerFlow: fl}
	summarise(res, m)
	return res, refused, errors.Join(errs...)
}

func describe(m *Mapped) string {
	s := m.Spec
	if s.Kind == netbed.KindStar {
		return fmt.Sprintf("testbed star, %d hosts, %v", s.Hosts, s.LinkRate)
	}
	return fmt.Sprintf("testbed leafspine, %d leaves x %d hosts, %d spines, %v", s.Leaves, s.HostsPerLeaf, s.Spines, s.LinkRate)
}

// summarise fills the completion and FCT figures the way the simulator does; the ideal
// of a flow is its serialisation at the link rate.
func summarise(res *sim.Result, m *Mapped) {
	var first, last int64 = -1, 0
	for i := range res.PerFlow {
		f := &res.PerFlow[i]
		pkts := (f.Size + int64(m.Transport.MTU) - 1) / int64(m.Transport.MTU)
		f.Ideal = (f.Size+pkts*(64+14+20+8+24))*8*1e9/int64(m.Transport.LinkRate) + int64(m.Transport.BaseRTT)
		if first < 0 || f.Start < first {
			first = f.Start
		}
		if f.Failed {
			res.Failed++
		}
		if f.FCT < 0 || f.Failed {
			continue
		}
		res.Completed++
		last = max(last, f.Start+f.FCT)
	}
	res.FCT = sim.SummariseFCT(res.PerFlow)
	if res.Completed == 0 {
		return
	}
	res.Completion = last - first
	res.Ideal = res.FCT.IdealMax
	if res.Completed+res.Failed == len(res.PerFlow) && res.Ideal > 0 {
		res.Ratio = float64(res.Completion) / float64(res.Ideal)
	}
	if c := chainIdeal(res.PerFlow, m); c > 0 {
		res.Ideal = c
		if res.Ratio > 0 {
			res.Ratio = float64(res.Completion) / float64(res.Ideal)
		}
	}
}

// newRun gives r a new temporary directory (its name starting with prefix) for its
// daemons' sockets. release, to be deferred even on an error, stops r's fabric unless
// the run stopped it, and removes the directory.
func newRun(r *Run, prefix string) (*Run, func(), error) {
	release := func() {
		if !r.fabStopped {
			r.Fabric.Stop()
		}
		if r.dir != "" {
			os.RemoveAll(r.dir)
		}
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, release, err
	}
	r.dir = dir
	return r, release, nil
}
