package sim

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/smartt-transport/smartt/config"
)

// fault is one configured failure, resolved to ports.
type fault struct {
	cfg   FailureConfig
	ports []int32 // switch output ports of the link (one or both directions)
	host  int32   // the host end of a host link, -1 otherwise
}

// nodeByName resolves "h12" or a switch name.
func (s *Sim) nodeByName(n string) (int32, error) {
	if rest, ok := strings.CutPrefix(n, "h"); ok {
		if i, err := strconv.Atoi(rest); err == nil && i >= 0 && i < len(s.hosts) {
			return int32(i), nil
		}
	}
	for i := range s.tp.sws {
		if s.tp.sws[i].name == n {
			return int32(len(s.hosts) + i), nil
		}
	}
	return -1, fmt.Errorf("no node %q (hosts are h0..h%d; switches are named like %s)", n, len(s.hosts)-1, s.tp.sws[0].name)
}

func (s *Sim) buildFaults() error {
	for i, fc := range s.sc.Failures {
		bad := func(format string, a ...any) error {
			return fmt.Errorf("failures[%d]: %s", i, fmt.Sprintf(format, a...))
		}
		a, err := s.nodeByName(fc.A)
		if err != nil {
			return bad("a: %v", err)
		}
		b, err := s.nodeByName(fc.B)
		if err != nil {
			return bad("b: %v", err)
		}
		f := fault{cfg: fc, host: -1}
		for _, d := range [][2]int32{{a, b}, {b, a}} {
			if p, ok := s.tp.portByLink[d]; ok {
				f.ports = append(f.ports, p)
			}
		}
		if len(f.ports) == 0 {
			return bad("no link between %s and %s", fc.A, fc.B)
		}
		if int(a) < len(s.hosts) {
			f.host = a
		} else if int(b) < len(s.hosts) {
			f.host = b
		}
		if err := fc.Check(config.Rate(s.tp.rate), f.host >= 0); err != nil {
			return bad("%v", err)
		}
		s.faults = append(s.faults, f)
	}
	return nil
}

// onFault starts (end false) or ends (end true) fault i.
func (s *Sim) onFault(i, end int32) {
	f := &s.faults[i]
	on := end == 0
	switch f.cfg.Kind {
	case "down":
		for _, pid := range f.ports {
			p := &s.tp.ports[pid]
			s.down[pid] = on // every part keeps every link's state, for routing
			if !s.own(p.owner) {
				continue
			}
			s.setFlag(pid, pfDown, on)
			if on {
				p.q.Flush(func(k pkt) { p.linkDrops++; s.freePkt(k.id) })
			}
		}
		if f.host >= 0 && s.own(f.host) {
			s.hosts[f.host].nicDown = on
		}
		s.schedule(s.now+int64(s.sc.RoutingConvergence), evRoute, 0, 0)
	case "degrade":
		for _, pid := range f.ports {
			p := &s.tp.ports[pid]
			if !s.own(p.owner) {
				continue
			}
			r := p.baseRate
			if on {
				r = int64(f.cfg.Rate)
			}
			p.q.SetRate(s.now, r)
			s.drainPort(pid)
		}
	case "flaky":
		for _, pid := range f.ports {
			p := &s.tp.ports[pid]
			if !s.own(p.owner) {
				continue
			}
			s.setFlag(pid, pfFlaky, on)
			if on {
				p.flaky.Start(s.now, int64(f.cfg.Gap), int64(f.cfg.Burst), s.sc.Seed^uint64(pid)<<20^0xf1a4)
			}
		}
	}
}

// setFlag sets or clears flag f of port pid.
func (s *Sim) setFlag(pid int32, f uint8, on bool) {
	if on {
		s.pflag[pid] |= f
	} else {
		s.pflag[pid] &^= f
	}
}

// recomputeRoutes makes switches hash only onto up ports from which the destination ToR
// is still reachable (what routing has converged to by now).
func (s *Sim) recomputeRoutes() {
	anyDown := false
	for i := range s.tp.ports {
		if s.down[i] && int(s.tp.ports[i].peer) >= len(s.hosts) && int(s.tp.ports[i].owner) >= len(s.hosts) {
			anyDown = true
			break
		}
	}
	H := int32(len(s.hosts))
	groups := (len(s.hosts) + s.tp.perToR - 1) / s.tp.perToR
	if !anyDown {
		for i := range s.tp.sws {
			if s.own(H + int32(i)) {
				s.tp.sws[i].allowed = nil
			}
		}
		return
	}
	memo := make([]int8, len(s.tp.sws)*groups) // 0 unknown, 1 yes, 2 no
	var reach func(node int32, g int) bool
	reach = func(node int32, g int) bool {
		if node < H {
			return true
		}
		m := &memo[int(node-H)*groups+g]
		if *m != 0 {
			return *m == 1
		}
		sw := &s.tp.sws[node-H]
		ok := false
		first := int32(g * s.tp.perToR)
		if first >= sw.lo && first < sw.hi {
			pid := sw.down[(first-sw.lo)/sw.span]
			ok = !s.down[pid] && reach(s.tp.ports[pid].peer, g)
		} else {
			for _, pid := range sw.up {
				if !s.down[pid] && reach(s.tp.ports[pid].peer, g) {
					ok = true
					break
				}
			}
		}
		*m = 2
		if ok {
			*m = 1
		}
		return ok
	}
	for i := range s.tp.sws {
		sw := &s.tp.sws[i]
		if len(sw.up) == 0 || !s.own(H+int32(i)) {
			continue // the other part routes its switches
		}
		if len(sw.up) > 64 {
			panic("sim: more than 64 uplinks per switch")
		}
		sw.allowed = make([]uint64, groups)
		for g := range groups {
			for k, pid := range sw.up {
				if !s.down[pid] && reach(s.tp.ports[pid].peer, g) {
					sw.allowed[g] |= 1 << k
				}
			}
		}
	}
}
