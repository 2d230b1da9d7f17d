package netbed

import (
	"errors"
	"fmt"

	"github.com/smartt-transport/smartt/test/uswitch"
)

// SwitchPort is one port of a switch node.
type SwitchPort struct {
	If   string  // interface in the switch's namespace
	Link int     // plan link index
	MAC  [6]byte // the port's own address
	Peer [6]byte // the address at the other end of the link
}

// SwitchPorts lists the ports of switch node sw in link order.
func (t *Testbed) SwitchPorts(sw int) []SwitchPort {
	var ps []SwitchPort
	for i, l := range t.Plan.Links {
		switch sw {
		case l.A:
			ps = append(ps, SwitchPort{l.AIf, i, [6]byte(mac(i, false)), [6]byte(mac(i, true))})
		case l.B:
			ps = append(ps, SwitchPort{l.BIf, i, [6]byte(mac(i, true)), [6]byte(mac(i, false))})
		}
	}
	return ps
}

// router builds the forwarding of switch node sw: a MAC table for the star's L2 switch,
// an L3 router with the plan's routes (ECMP via choose) for leaves and spines.
func (t *Testbed) router(sw int, choose uswitch.Choose) (uswitch.Router, error) {
	ps := t.SwitchPorts(sw)
	if t.Plan.Spec.Kind == KindStar {
		r := uswitch.NewLearning()
		for i, p := range ps {
			r.Learn(p.Peer, i)
		}
		return r, nil
	}
	portOf := map[int]int{} // link -> port
	macs := make([][6]byte, len(ps))
	var routes []uswitch.L3Route
	for i, p := range ps {
		portOf[p.Link] = i
		macs[i] = p.MAC
		l := t.Plan.Links[p.Link]
		other := l.A
		if other == sw {
			other = l.B
		}
		if a := t.Plan.Nodes[other].Addr; a.IsValid() { // a host: its own /32
			routes = append(routes, uswitch.L3Route{Dst: netipPrefix32(a), Hops: []uswitch.NextHop{{Port: i, MAC: p.Peer}}})
		}
	}
	for _, r := range t.Plan.Routes {
		if r.Node != sw {
			continue
		}
		rt := uswitch.L3Route{Dst: r.Dst}
		for _, h := range r.Via {
			i := portOf[h.Link]
			rt.Hops = append(rt.Hops, uswitch.NextHop{Port: i, MAC: ps[i].Peer})
		}
		routes = append(routes, rt)
	}
	return uswitch.NewL3Router(macs, routes, choose)
}

// OpenSwitches opens a userspace switch (unstarted) in every switch namespace: a MAC table
// pinned to the hosts for a star, the plan's routes with ECMP by choose(node) for leaves
// and spines (choose may be nil for a star). tune, if not nil, may change each switch's
// configuration (queues, batch) before it opens.
func (t *Testbed) OpenSwitches(choose func(node string) uswitch.Choose, tune func(node string, cfg *uswitch.Config)) (names []string, sws []*uswitch.Switch, err error) {
	fail := func(err error) ([]string, []*uswitch.Switch, error) {
		for _, s := range sws {
			s.Close()
		}
		return nil, nil, err
	}
	for n, node := range t.Plan.Nodes {
		if !node.Switch {
			continue
		}
		var c uswitch.Choose
		if choose != nil {
			c = choose(node.Name)
		}
		r, err := t.router(n, c)
		if err != nil {
			return fail(fmt.Errorf("switch %s: %w", node.Name, err))
		}
		cfg := uswitch.Config{Router: r}
		for _, p := range t.SwitchPorts(n) {
			cfg.Ports = append(cfg.Ports, p.If)
		}
		if tune != nil {
			tune(node.Name, &cfg)
		}
		var sw *uswitch.Switch
		if err := DoHandle(t.ns[n], func() (err error) { sw, err = uswitch.Open(cfg); return err }); err != nil {
			return fail(fmt.Errorf("switch %s: %w", node.Name, err))
		}
		names, sws = append(names, node.Name), append(sws, sw)
	}
	return names, sws, nil
}

// RunSwitches opens the switches (see OpenSwitches) and runs each in its own goroutine.
// stop stops and closes them all and returns the first error any of them ended with.
func (t *Testbed) RunSwitches(choose func(node string) uswitch.Choose, tune func(node string, cfg *uswitch.Config)) (names []string, sws []*uswitch.Switch, stop func() error, err error) {
	names, sws, err = t.OpenSwitches(choose, tune)
	if err != nil {
		return nil, nil, nil, err
	}
	done := make(chan error, len(sws))
	for _, sw := range sws {
		go func() { done <- sw.Run() }()
	}
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		var errs []error
		for _, sw := range sws {
			sw.Stop()
		}
		for range sws {
			errs = append(errs, <-done)
		}
		for _, sw := range sws {
			errs = append(errs, sw.Close())
		}
		return errors.Join(errs...)
	}
	return names, sws, stop, nil
}
