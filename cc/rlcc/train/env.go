// Package train is RL-CC's training and distillation pipeline on the project's simulator
// (test/sim running the real engine): the paper's deterministic on-policy gradient for
// the policy network (rlccnet.MLP), recording of on-policy (observation, action) pairs and
// their distillation into boosted oblivious trees (rlcc.Fit), and the evaluations of
// docs/rlcc.md (Table VI, Fig. 3). Everything is deterministic for a seed.
package train

import (
	"fmt"
	"math"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/rlcc"
	"github.com/smartt-transport/smartt/cc/rlcc/rlccnet"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/sim"
	"github.com/smartt-transport/smartt/transport"
)

// Env is the training network: N flows from N sender hosts to one receiver through one
// switch port (the simulator's "single" topology; it keeps one connection per host pair,
// so each flow has its own sender host).
type Env struct {
	LinkRate    int64   // bit/s (100 Gbit/s, the paper's)
	LinkLatency int64   // ns per link (2.5 us: base RTT about 10.7 us)
	QueueBDPs   float64 // bottleneck data queue in base-RTT BDPs (4)
	MTU         int     // 4096
	Jitter      int64   // flows start uniformly in [0, Jitter] ns (20 us)
	RLCC        rlcc.Config
}

// DefaultEnv is the environment of the default training and of the evaluations.
func DefaultEnv() Env {
	return Env{LinkRate: 100_000_000_000, LinkLatency: 2500, QueueBDPs: 4, MTU: 4096, Jitter: 20_000,
		RLCC: rlcc.DefaultConfig()}
}

// Policy makes one controller per flow (flow numbers count from 0 in creation order).
type Policy interface {
	NewController(net config.Network, flow int) (cc.Controller, error)
	Name() string
}

// NetPolicy runs the policy network; OnDecision (optional) sees every decision.
type NetPolicy struct {
	Net        *rlccnet.MLP
	Cfg        rlcc.Config
	OnDecision func(c *rlccnet.NetController, d *rlccnet.Decision)
	params     *rlccnet.NetParams
}

// Name implements Policy.
func (p *NetPolicy) Name() string { return "network" }

// NewController implements Policy.
func (p *NetPolicy) NewController(net config.Network, flow int) (cc.Controller, error) {
	if p.params == nil {
		np, err := rlccnet.NewNetParams(p.Cfg, net, p.Net)
		if err != nil {
			return nil, err
		}
		np.OnDecision = p.OnDecision
		p.params = np
	}
	c := rlccnet.NewNet(p.params)
	c.Flow = flow
	return c, nil
}

// TreePolicy runs a tree model with the integer controller (the NIC's).
type TreePolicy struct {
	Model  *rlcc.Model
	Cfg    rlcc.Config
	params *rlcc.Params
}

// Name implements Policy.
func (p *TreePolicy) Name() string { return "trees" }

// NewController implements Policy.
func (p *TreePolicy) NewController(net config.Network, flow int) (cc.Controller, error) {
	if p.params == nil {
		pp, err := rlcc.NewParamsWithModel(p.Cfg, net, p.Model)
		if err != nil {
			return nil, err
		}
		p.params = pp
	}
	return rlcc.New(p.params), nil
}

// CCPolicy runs any registered congestion controller by name (baselines beside RL-CC),
// with the engine's defaults for it.
type CCPolicy struct{ CC string }

// Name implements Policy.
func (p *CCPolicy) Name() string { return p.CC }

// NewController implements Policy; Env.Run builds these itself from the host's
// configuration, so this is not called.
func (p *CCPolicy) NewController(config.Network, int) (cc.Controller, error) {
	return nil, fmt.Errorf("CCPolicy %s: built by Env.Run", p.CC)
}

// Stats are measured over an episode's window [Warm, end): by every flow's controller
// (probe), so they need nothing from the simulator but the ACKs.
type Stats struct {
	Flows       int
	Goodput     float64 // payload acknowledged / line rate over the window
	Inflation   float64 // mean RTT sample / base RTT over the window
	Losses      uint64  // packets judged lost (trimmed or timed out) in the window
	AllLosses   uint64  // packets judged lost over the whole run, start-up included
	Trims       uint64  // switch trims over the whole run
	Drops       uint64  // switch drops over the whole run
	Failed      int     // flows the engine failed
	FairMin     float64 // lowest flow goodput / fair share over the window
	FairMax     float64 // highest
	BaseRTT     int64   // ns
	SimNs       int64   // simulated time
	Events      uint64
	WallSeconds float64
}

// probe wraps a controller and measures from warm on.
type probe struct {
	cc.Controller
	warm     int64
	rttSum   float64
	rttN     float64
	bytes    int64
	losses   uint64
	host     int
	mark     int64   // a second time of interest (long-short: the burst)
	early    int64   // bytes acknowledged in [warm, mark)
	lateLoss uint64  // losses from mark on
	allLoss  uint64  // losses over the whole run
	bin      int64   // width of bins, ns (0: none)
	bins     []int64 // bytes acknowledged per bin from mark on (long-short's reaction)
	ts       *Series // every flow's totals per interval (nil: none)
}

// probeBin is the width of the time bins a probe counts acknowledged bytes in after its
// mark: fine enough to time a reaction to within a few RTTs.
const probeBin = 20_000

func (p *probe) OnAck(a cc.Ack) {
	if a.Now >= p.warm {
		if a.RTT > 0 {
			p.rttSum += float64(a.RTT)
			p.rttN++
		}
		p.bytes += int64(a.Bytes)
		if a.Now < p.mark {
			p.early += int64(a.Bytes)
		}
	}
	if p.bin > 0 && a.Now >= p.mark {
		i := int((a.Now - p.mark) / p.bin)
		for len(p.bins) <= i {
			p.bins = append(p.bins, 0)
		}
		p.bins[i] += int64(a.Bytes)
	}
	if p.ts != nil {
		p.ts.add(a.Now, int64(a.Bytes), a.RTT, false)
	}
	p.Controller.OnAck(a)
}

func (p *probe) OnLoss(l cc.Loss) {
	p.allLoss++
	if l.Now >= p.warm {
		p.losses++
	}
	if l.Now >= p.mark {
		p.lateLoss++
	}
	if p.ts != nil {
		p.ts.add(l.Now, 0, 0, true)
	}
	p.Controller.OnLoss(l)
}

// Run runs one incast of n flows for warm+measure ns of simulated time with the
// simulator's seed, and measures the window after warm.
func (e Env) Run(pol Policy, n int, seed uint64, warm, measure int64) (Stats, error) {
	if n < 1 || n > 1<<16 {
		return Stats{}, fmt.Errorf("flows = %d: must be in 1..65536", n)
	}
	end := warm + measure
	size := max(int64(float64(e.LinkRate)/8*float64(end)/1e9), 1<<20)
	wl := sim.WorkloadConfig{Kind: "incast", Senders: n, Receiver: 0, Size: sim.Size(size), Jitter: config.Duration(e.Jitter)}
	r, probes, netw, err := e.simulate(pol, fmt.Sprintf("rlcc-incast-%d", n), e.single(n+1), wl, size, int64(n)*size, seed, warm, end, end, nil)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Flows: n, Trims: r.Trims, Drops: r.Drops, Failed: r.Failed, BaseRTT: int64(netw.BaseRTT),
		SimNs: r.SimTime, Events: r.Events, WallSeconds: r.WallSeconds, FairMin: math.Inf(1)}
	var bytes int64
	var rs, rn float64
	fair := float64(e.LinkRate) / 8 * float64(measure) / 1e9 / float64(n)
	for _, p := range probes {
		bytes += p.bytes
		rs += p.rttSum
		rn += p.rttN
		st.Losses += p.losses
		st.AllLosses += p.allLoss
		f := float64(p.bytes) / fair
		st.FairMin = min(st.FairMin, f)
		st.FairMax = max(st.FairMax, f)
	}
	st.Goodput = float64(bytes) * 8 / (float64(e.LinkRate) * float64(measure) / 1e9)
	if rn > 0 {
		st.Inflation = rs / rn / float64(netw.BaseRTT)
	}
	return st, nil
}

// single is the environment's one switch with hosts hosts.
func (e Env) single(hosts int) sim.TopologyConfig {
	return sim.TopologyConfig{Kind: "single", Hosts: hosts, LinkRate: config.Rate(e.LinkRate),
		LinkLatency: config.Duration(e.LinkLatency),
		Queue:       sim.QueueConfig{BDPs: e.QueueBDPs, Kmin: 0.2, Kmax: 0.8}}
}

// simulate runs workload wl on topology topo until end, every sender's controllers made
// by pol and wrapped in a probe measuring from warm on (in creation order; probe.host is
// the sender; probe.mark = mark; every probe adds to ts if set). Host 0's controllers are not probed when it only
// receives (incast, long-short); in an all-to-all it sends too.
func (e Env) simulate(pol Policy, name string, topo sim.TopologyConfig, wl sim.WorkloadConfig, maxMsg, recvBudget int64, seed uint64, warm, mark, end int64, ts *Series) (*sim.Result, []*probe, config.Network, error) {
	sc := &sim.Scenario{
		Name:      name,
		Seed:      seed,
		Topology:  topo,
		Transport: transport.DefaultConfig(),
		Workload:  wl,
		Deadline:  config.Duration(end),
	}
	tc := &sc.Transport
	tc.CC = "rlcc"
	tc.LinkRate, tc.BaseRTT = 0, 0 // the simulator's: the fabric's rate and empty-path RTT
	tc.MTU = e.MTU
	tc.RLCC = e.RLCC
	tc.MaxRetransmits = 255 // a 1,024-flow start trims the same packet many times
	tc.MaxMessage = max(tc.MaxMessage, int(maxMsg))
	// The receiver is a sink: its receive budget must not shape the controllers' data
	// (at 2 GiB, the unproven share bound a 72-flow episode, and the engine's charges
	// then decided what the policy saw), so the largest budget the engine takes.
	tc.RecvBudget = max(recvBudget, 1<<40)
	var probes []*probe
	var nerr error
	var netw config.Network
	sc.NewTransport = func(host int, cfg *transport.Config, hk *transport.Hooks) {
		netw = cfg.Network()
		if host == 0 && wl.Kind != "all_to_all" {
			return // the receiver: its controllers send nothing
		}
		named, isNamed := pol.(*CCPolicy)
		if isNamed {
			cfg.CC = named.CC
		}
		hc := *cfg
		hk.NewCC = func() cc.Controller {
			var c cc.Controller
			var err error
			if isNamed {
				c, err = transport.NewCC(named.CC, hc)
			} else {
				c, err = pol.NewController(hc.Network(), len(probes))
			}
			if err != nil {
				nerr = err
				c = &cc.Fixed{Bytes: cfg.MTU}
			}
			pr := &probe{Controller: c, warm: warm, host: host, mark: mark, ts: ts}
			if mark < end {
				pr.bin = probeBin
			}
			probes = append(probes, pr)
			return pr
		}
	}
	s, err := sim.New(sc)
	if err != nil {
		return nil, nil, netw, err
	}
	r := s.Run()
	if nerr != nil {
		return nil, nil, netw, nerr
	}
	return r, probes, netw, nil
}
