package netbed

import (
	"fmt"

	"smartt/test/uswitch"
)

// SwitchPorts lists, for switch node sw, its port interfaces and the MAC address of the
// host behind each, in port order.
func (t *Testbed) SwitchPorts(sw int) (ports []string, macs [][6]byte) {
	for i, l := range t.Plan.Links {
		if l.B == sw {
			ports = append(ports, l.BIf)
			macs = append(macs, [6]byte(mac(i, false)))
		}
	}
	return ports, macs
}

// OpenSwitches opens a userspace switch (unstarted) in every switch namespace, with its
// ports and a MAC table pinned to the hosts' addresses, so nothing is flooded. tune, if
// not nil, may change each switch's configuration (queues, batch) before it opens. The
// caller runs each switch's Run in a goroutine and Stops and Closes it.
func (t *Testbed) OpenSwitches(tune func(node string, cfg *uswitch.Config)) (names []string, sws []*uswitch.Switch, err error) {
	for n, node := range t.Plan.Nodes {
		if !node.Switch {
			continue
		}
		ports, macs := t.SwitchPorts(n)
		r := uswitch.NewLearning()
		for p, m := range macs {
			r.Learn(m, p)
		}
		cfg := uswitch.Config{Ports: ports, Router: r}
		if tune != nil {
			tune(node.Name, &cfg)
		}
		var sw *uswitch.Switch
		if err := DoHandle(t.ns[n], func() (err error) { sw, err = uswitch.Open(cfg); return err }); err != nil {
			for _, s := range sws {
				s.Close()
			}
			return nil, nil, fmt.Errorf("switch %s: %w", node.Name, err)
		}
		names, sws = append(names, node.Name), append(sws, sw)
	}
	return names, sws, nil
}
