package netbed

import (
	"errors"
	"fmt"

	"smartt/config"
	"smartt/test/switchport"
	"smartt/test/uswitch"
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
	// Delay is the propagation delay added to every departure, ns.
	Delay int64
	// TrimDSCP is written into trimmed frames (the daemon's transport.trim_dscp).
	TrimDSCP uint8
	// Seed derives every switch's ECMP salt and RED randomness.
	Seed uint64
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
	Model            *switchport.Port[*uswitch.Frame]
}

// Fabric is the running userspace switches of an emulated testbed with the port model.
type Fabric struct {
	Names []string
	Sws   []*uswitch.Switch
	Ports [][]ModelPort // per switch, per port
	stop  func() error
}

// PortCounters are one port's counters after a run.
type PortCounters struct {
	Switch, If, Link string
	uswitch.PortStats
	Model switchport.Stats
}

// RunFabric runs every switch of an emulated testbed with m's port model on every port
// and switchport's ECMP hash with a per-switch salt.
func (t *Testbed) RunFabric(m PortModel) (*Fabric, error) {
	if t.Plan.Spec.Mode != ModeEmulated {
		return nil, fmt.Errorf("testbed %s is in %s mode; the port model needs mode emulated", t.Name, t.Plan.Spec.Mode)
	}
	if m.Rate == 0 {
		m.Rate = t.Plan.Spec.LinkRate
	}
	f := &Fabric{}
	var cfgErr error
	ports := map[string][]ModelPort{}
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
				KminBytes: m.KminBytes, KmaxBytes: m.KmaxBytes, Trim: m.Trim, TrimBytes: TrimWireBytes}
			p, err := switchport.New[*uswitch.Frame](pc, Salt(m.Seed, node)+uint64(i))
			if err != nil {
				cfgErr = fmt.Errorf("switch %s port %s: %w", node, sp.If, err)
				return
			}
			mps[i] = ModelPort{Switch: node, If: sp.If, Link: l.Name, Model: p}
		}
		ports[node] = mps
		cfg.NewQueue = func(i int) uswitch.Queue { return ModelQueue(mps[i].Model, m.Delay, m.TrimDSCP) }
	}
	choose := func(node string) uswitch.Choose { return ECMP(Salt(m.Seed, node)) }
	names, sws, stop, err := t.RunSwitches(choose, tune)
	if err == nil && cfgErr != nil {
		err = errors.Join(cfgErr, stop())
	}
	if err != nil {
		return nil, err
	}
	f.Names, f.Sws, f.stop = names, sws, stop
	for _, n := range names {
		f.Ports = append(f.Ports, ports[n])
	}
	return f, nil
}

// ModelQueue wraps a switchport Port as a userspace-switch queue (the glue of
// uswitch.Model's documentation).
func ModelQueue(p *switchport.Port[*uswitch.Frame], delay int64, trimDSCP uint8) *uswitch.ModelQueue {
	m := uswitch.Model{
		Arrive: func(now int64, f *uswitch.Frame, size int, data, ect bool) uswitch.Verdict {
			return uswitch.Verdict(p.Arrive(now, f, size, data, ect))
		},
		Advance:   p.Advance,
		NextStart: p.NextStart,
		Pop: func() (uswitch.Departure, bool) {
			d, ok := p.Pop()
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
			out = append(out, PortCounters{Switch: mp.Switch, If: mp.If, Link: mp.Link,
				PortStats: sw.Stats(i), Model: mp.Model.Stats()})
		}
	}
	return out
}

// LinkTx sums the frames the switches sent into link from either end, refused sends
// (TxErrors: the link is down) included.
func (f *Fabric) LinkTx(link string) (frames, refused uint64) {
	for s := range f.Names {
		for i, mp := range f.Ports[s] {
			if mp.Link == link {
				st := f.Sws[s].Stats(i)
				frames += st.TxFrames + st.TxErrors
				refused += st.TxErrors
			}
		}
	}
	return frames, refused
}
