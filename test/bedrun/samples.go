package bedrun

import (
	"fmt"
	"strings"
	"time"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/netbed"
	"github.com/smartt-transport/smartt/test/sim"
)

// simName is a testbed node's name in the simulator (leaf<i> is tor<i>).
func simName(n string) string {
	if rest, ok := strings.CutPrefix(n, "leaf"); ok {
		return "tor" + rest
	}
	return n
}

// sampleOptions maps the scenario's output.sample_* to the fabric's sampler: the same
// port selections as the simulator (hosts: switch ports toward hosts; up: leaf uplinks;
// all; or names like tor0->spine1).
func sampleOptions(sc *sim.Scenario, tb *netbed.Testbed) (*netbed.SampleOptions, error) {
	oc := sc.Output
	if oc.SampleInterval < 0 || oc.MaxSamples < 0 {
		return nil, fmt.Errorf("output: sample_interval and max_samples must be >= 0")
	}
	if oc.SampleInterval == 0 {
		return nil, nil
	}
	if oc.SampleInterval < config10us {
		return nil, fmt.Errorf("output.sample_interval = %v: the testbed samples at 10us or more (the switch loop's wake-ups)", oc.SampleInterval)
	}
	isHost := func(n string) bool { i := tb.Plan.NodeIndex(n); return i >= 0 && !tb.Plan.Nodes[i].Switch }
	o := &netbed.SampleOptions{Interval: int64(oc.SampleInterval), Max: oc.MaxSamples}
	group, names, err := oc.PortSelection()
	if err != nil {
		return nil, err
	}
	switch group {
	case "hosts":
		o.Ports = func(_, peer string) bool { return isHost(peer) }
	case "up":
		o.Ports = func(sw, peer string) bool { return strings.HasPrefix(sw, "leaf") && !isHost(peer) }
	case "all":
	default:
		want := map[[2]string]bool{}
		for _, n := range names {
			k := [2]string{simName(n[0]), simName(n[1])}
			found := false
			for _, l := range tb.Plan.Links {
				na, nb := simName(tb.Plan.Nodes[l.A].Name), simName(tb.Plan.Nodes[l.B].Name)
				found = found || (k == [2]string{na, nb} || k == [2]string{nb, na})
			}
			if !found || isHost(k[0]) {
				return nil, fmt.Errorf("output.sample_ports: no switch port %s->%s", n[0], n[1])
			}
			want[k] = true
		}
		o.Ports = func(sw, peer string) bool { return want[[2]string{simName(sw), simName(peer)}] }
	}
	return o, nil
}

const config10us = config.Duration(10 * time.Microsecond)

// series converts the fabric's samples to the simulator's, ports named as there.
func series(s []netbed.QueueSamples) []sim.QueueSeries {
	out := make([]sim.QueueSeries, len(s))
	for i, q := range s {
		out[i] = sim.QueueSeries{Port: simName(q.Switch) + "->" + simName(q.Peer), Times: q.Times, Bytes: q.Bytes}
	}
	return out
}
