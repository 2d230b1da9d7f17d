package netbed

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/switchport"
	"github.com/smartt-transport/smartt/test/uswitch"
)

// TrimWireBytes is the wire size of a trimmed frame on the testbed: Ethernet (14), IPv4
// (20), UDP (8) and our 64-byte header, plus uswitch.WireOverhead (24) for preamble, FCS
// and gap. switchport's TrimBytes must say so, or the model's serialisation of trimmed
// headers would not match the bytes that leave.
const TrimWireBytes = 14 + 20 + 8 + 64 + uswitch.WireOverhead

// PortModel configures test/switchport's port model (the simulator's) on every output
// port of every emulated switch.
type PortModel struct {
	// Rate is the port rate where the link has none (bits/s); 0 takes Spec.LinkRate.
	Rate config.Rate
	// DataBytes, ControlBytes, KminBytes, KmaxBytes and Trim are switchport.Config's.
	DataBytes, ControlBytes, KminBytes, KmaxBytes int
	Trim                                          bool
	// ReturnToSender (with Trim) sends trimmed headers back to their senders
	// (switchport.Config.ReturnToSender; the switch routes them, uswitch.Returner).
	ReturnToSender bool
	// Delay is the propagation delay added to every departure, ns.
	Delay int64
	// TrimDSCP is written into trimmed frames (the daemon's transport.trim_dscp).
	TrimDSCP uint8
	// Seed derives every switch's ECMP salt and RED randomness.
	Seed uint64
	// INT makes every port stamp in-band telemetry (switchport.INT) into DATA packets that
	// carry an INT block (the daemons' transport.int).
	INT bool
}

// ECMP returns the Choose function of a switch with the given salt: test/switchport's
// hash, the one the simulator's switches use.
func ECMP(salt uint64) uswitch.Choose {
	return func(src, dst uint32, proto uint8, sp, dp uint16, n int) int {
		return switchport.Pick(switchport.Hash4(salt, src, dst, proto, sp, dp), n)
	}
}

// Salt is switch node's ECMP salt under seed.
func Salt(seed uint64, node string) uint64 {
	w := make([]uint64, 0, len(node))
	for _, c := range []byte(node) {
		w = append(w, uint64(c))
	}
	return switchport.HashWords(seed, w...)
}

// ModelPort is one emulated output port: the switch's counters and the model's.
type ModelPort struct {
	Switch, If, Link string // switch node, interface, plan link name
	Peer             string // the node at the other end of the link
	Rate             int64  // the port's configured rate, bits/s (what SetRate 0 restores)
	Model            *switchport.Port[*uswitch.Frame]
	// DataIn counts DATA frames (our header's type) routed to the port, control frames
	// (ACK, NACK, trimmed headers from upstream) not included.
	DataIn *atomic.Uint64
}

// Fabric is the running userspace switches of an emulated testbed with the port model.
type Fabric struct {
	Names []string
	Sws   []*uswitch.Switch
	Ports [][]ModelPort // per switch, per port
	t     *Testbed
	l3    map[string]*uswitch.L3Router
	stop  func() error
	st    []*swState // per switch: flaky links, sampler, capture (fabricops.go)
}

// PortCounters are one port's counters after a run.
type PortCounters struct {
	Switch, If, Link string
	Peer             string // node at the other end
	uswitch.PortStats
	Model  switchport.Stats
	DataIn uint64 // DATA frames routed to the port
}

// RunFabric runs every switch of an emulated testbed with m's port model on every port
// and switchport's ECMP hash with a per-switch salt.
func (t *Testbed) RunFabric(m PortModel) (*Fabric, error) { return t.RunFabricWith(m, FabricOptions{}) }

// RunFabricWith is RunFabric with queue sampling and frame capture (see FabricOptions).
func (t *Testbed) RunFabricWith(m PortModel, o FabricOptions) (*Fabric, error) {
	if t.Plan.Spec.Mode != ModeEmulated {
		return nil, fmt.Errorf("testbed %s is in %s mode; the port model needs mode emulated", t.Name, t.Plan.Spec.Mode)
	}
	if m.Rate == 0 {
		m.Rate = t.Plan.Spec.LinkRate
	}
	f := &Fabric{}
	var cfgErr error
	ports := map[string][]ModelPort{}
	states := map[string]*swState{}
	l3 := map[string]*uswitch.L3Router{}
	tune := func(node string, cfg *uswitch.Config) {
		n := t.Plan.NodeIndex(node)
		sps := t.SwitchPorts(n)
		mps := make([]ModelPort, len(sps))
		for i, sp := range sps {
			l := t.Plan.Links[sp.Link]
			rate := l.Rate
			if rate == 0 {
				rate = m.Rate
			}
			if rate == 0 {
				cfgErr = fmt.Errorf("link %s: the port model needs a rate (link_rate > 0)", l.Name)
				return
			}
			pc := switchport.Config{Rate: int64(rate), DataBytes: m.DataBytes, ControlBytes: m.ControlBytes,
				KminBytes: m.KminBytes, KmaxBytes: m.KmaxBytes, Trim: m.Trim, TrimBytes: TrimWireBytes,
				ReturnToSender: m.ReturnToSender}
			p, err := switchport.New[*uswitch.Frame](pc, Salt(m.Seed, node)+uint64(i))
			if err != nil {
				cfgErr = fmt.Errorf("switch %s port %s: %w", node, sp.If, err)
				return
			}
			peer := l.A
			if peer == n {
				peer = l.B
			}
			mps[i] = ModelPort{Switch: node, If: sp.If, Link: l.Name, Peer: t.Plan.Nodes[peer].Name, Rate: int64(rate),
				Model: p, DataIn: new(atomic.Uint64)}
		}
		ports[node] = mps
		st := newSwState(t, n, mps, o)
		states[node] = st
		st.hook(cfg)
		if r, ok := cfg.Router.(*uswitch.L3Router); ok {
			l3[node] = r
		}
		cfg.NewQueue = func(i int) uswitch.Queue {
			return modelQueue(mps[i].Model, mps[i].DataIn, m.Delay, m.TrimDSCP, m.INT)
		}
	}
	choose := func(node string) uswitch.Choose { return ECMP(Salt(m.Seed, node)) }
	names, sws, stop, err := t.RunSwitches(choose, tune)
	if err == nil && cfgErr != nil {
		err = errors.Join(cfgErr, stop())
	}
	if err != nil {
		return nil, err
	}
	f.Names, f.Sws, f.stop, f.t, f.l3 = names, sws, stop, t, l3
	for _, n := range names {
		f.Ports = append(f.Ports, ports[n])
		f.st = append(f.st, states[n])
	}
	return f, nil
}

// ModelQueue wraps a switchport Port as a userspace-switch queue (the glue of
// uswitch.Model's documentation).
func ModelQueue(p *switchport.Port[*uswitch.Frame], delay int64, trimDSCP uint8) *uswitch.ModelQueue {
	return modelQueue(p, nil, delay, trimDSCP, false)
}

// modelQueue is ModelQueue counting arriving DATA frames in dataIn (if not nil), and
// with stampINT writing the port's INT record into the DATA frames it serves.
func modelQueue(p *switchport.Port[*uswitch.Frame], dataIn *atomic.Uint64, delay int64, trimDSCP uint8, stampINT bool) *uswitch.ModelQueue {
	var ix switchport.INT
	m := uswitch.Model{
		Arrive: func(now int64, f *uswitch.Frame, size int, data, ect bool) uswitch.Verdict {
			if data && dataIn != nil {
				dataIn.Add(1)
			}
			return uswitch.Verdict(p.Arrive(now, f, size, data, ect))
		},
		Advance:     p.Advance,
		NextStart:   p.NextStart,
		PopReturned: p.PopReturned,
		Pop: func() (uswitch.Departure, bool) {
			d, ok := p.Pop()
			if ok && stampINT {
				// Every departure, in service order, counts toward the port's byte counter.
				if rec := ix.Record(d.Start, d.Size, d.QLen, p.Rate()); d.Item.IsData() {
					d.Item.StampINT(rec)
				}
			}
			return uswitch.Departure{Frame: d.Item, End: d.End, Trimmed: d.Trimmed, Marked: d.Marked}, ok
		},
	}
	return uswitch.NewModelQueue(m, delay, trimDSCP)
}

// Stop stops and closes the switches.
func (f *Fabric) Stop() error { return f.stop() }

// Counters returns every port's counters. The model's counters are read without
// synchronisation: call it after Stop for exact figures (the switch counters are atomic).
func (f *Fabric) Counters() []PortCounters {
	var out []PortCounters
	for s, sw := range f.Sws {
		for i, mp := range f.Ports[s] {
			out = append(out, PortCounters{Switch: mp.Switch, If: mp.If, Link: mp.Link, Peer: mp.Peer,
				PortStats: sw.Stats(i), Model: mp.Model.Stats(), DataIn: mp.DataIn.Load()})
		}
	}
	return out
}

// LinkTx sums the frames the switches sent into link from either end, refused sends
// (TxErrors: the link is down) included, and the DATA frames among them (counted as
// they are queued at the port).
func (f *Fabric) LinkTx(link string) (frames, data uint64) {
	for s := range f.Names {
		for i, mp := range f.Ports[s] {
			if mp.Link == link {
				st := f.Sws[s].Stats(i)
				frames += st.TxFrames + st.TxErrors
				data += mp.DataIn.Load()
			}
		}
	}
	return frames, data
}

// Converge makes the switches route around link (down) or over it again (up), as a
// routing protocol would once it has converged: the switch at the link's lower end stops
// hashing onto it, and every other switch stops hashing onto next hops whose only way
// to the destination is that link. Until then (the testbed's LinkDown alone) switches
// keep hashing flows into the dead link, as before convergence in a real fabric.
func (f *Fabric) Converge(link string, down bool) error {
	p := f.t.Plan
	li := p.LinkIndex(link)
	if li < 0 {
		return fmt.Errorf("no link %q", link)
	}
	portOf := func(node, link int) int {
		for i, sp := range f.t.SwitchPorts(node) {
			if sp.Link == link {
				return i
			}
		}
		return -1
	}
	other := func(l Link, n int) int {
		if l.A == n {
			return l.B
		}
		return l.A
	}
	for _, r := range p.Routes {
		router := f.l3[p.Nodes[r.Node].Name]
		if router == nil || len(r.Via) < 2 {
			continue
		}
		for _, h := range r.Via {
			excl := h.Link == li
			if !excl {
				// A hop toward a neighbour whose only route to r.Dst is the dead link.
				nb := other(p.Links[h.Link], r.Node)
				for _, nr := range p.Routes {
					if nr.Node == nb && nr.Dst == r.Dst && len(nr.Via) == 1 && nr.Via[0].Link == li {
						excl = true
					}
				}
			}
			if excl {
				router.SetDown(r.Dst, portOf(r.Node, h.Link), down)
			}
		}
	}
	return nil
}
