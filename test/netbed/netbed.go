// Package netbed builds network-namespace testbeds: hosts and switches in their own
// namespaces joined by veth pairs, built through netlink (no `ip` commands). In kernel mode the
// leaves and spines are Linux routers doing L4-hash ECMP over multipath routes, with tbf
// shaping link rates; links can be failed, restored, slowed down and made lossy.
//
// Every namespace is named "smartt-<testbed>-<node>"; all other objects live inside those
// namespaces, so deleting the namespaces (Down, or the next Up after a crash) removes
// everything a testbed made.
package netbed

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"go.yaml.in/yaml/v3"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/nsenter"
)

// StateDir holds one file per testbed (its spec), so status and down find what up built.
const StateDir = "/run/smartt"

func statePath(testbed string) string {
	return filepath.Join(StateDir, "testbed-"+testbed+".yaml")
}

// Testbed is a built topology with open handles to its namespaces.
type Testbed struct {
	Name string
	Plan *Plan
	ns   []netns.NsHandle
	nl   []*netlink.Handle
}

// Up removes what is left of a testbed of the same name, then builds spec.
func Up(name string, spec Spec) (*Testbed, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	p, err := NewPlan(spec)
	if err != nil {
		return nil, err
	}
	if err := Remove(name); err != nil {
		return nil, fmt.Errorf("clean leftovers: %w", err)
	}
	t := &Testbed{Name: name, Plan: p}
	if err := t.build(); err != nil {
		t.Close()
		return nil, errors.Join(err, Remove(name))
	}
	if err := os.MkdirAll(StateDir, 0o755); err == nil {
		b, _ := yaml.Marshal(p.Spec)
		os.WriteFile(statePath(name), b, 0o644)
	}
	return t, nil
}

// Open attaches to a testbed that Up built (possibly in another process).
func Open(name string) (*Testbed, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(statePath(name))
	if err != nil {
		return nil, fmt.Errorf("testbed %s: no state (is it up?): %w", name, err)
	}
	var s Spec
	if err := config.DecodeYAML(b, &s); err != nil {
		return nil, fmt.Errorf("testbed %s state: %w", name, err)
	}
	p, err := NewPlan(s)
	if err != nil {
		return nil, err
	}
	t := &Testbed{Name: name, Plan: p}
	for _, n := range p.Nodes {
		h, err := netns.GetFromName(NsName(name, n.Name))
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("testbed %s: namespace of %s: %w", name, n.Name, err)
		}
		t.ns = append(t.ns, h)
		nh, err := netlink.NewHandleAt(h)
		if err != nil {
			t.Close()
			return nil, err
		}
		t.nl = append(t.nl, nh)
	}
	return t, nil
}

// Close releases the handles; the testbed stays up.
func (t *Testbed) Close() {
	for _, h := range t.nl {
		h.Close()
	}
	for _, h := range t.ns {
		h.Close()
	}
	t.nl, t.ns = nil, nil
}

// Down closes the handles and removes every namespace of the testbed.
func (t *Testbed) Down() error {
	t.Close()
	return Remove(t.Name)
}

// Ns is the namespace name of a node, for Do.
func (t *Testbed) Ns(node string) string { return NsName(t.Name, node) }

// NsHandle is the open namespace handle of node index i.
func (t *Testbed) NsHandle(i int) netns.NsHandle { return t.ns[i] }

// Addr is the IPv4 address of a host node.
func (t *Testbed) Addr(node string) netip.Addr {
	if i := t.Plan.NodeIndex(node); i >= 0 {
		return t.Plan.Nodes[i].Addr
	}
	return netip.Addr{}
}

// mac gives every veth end a fixed address, so static neighbours need no lookup.
func mac(link int, bEnd bool) net.HardwareAddr {
	e := byte(0)
	if bEnd {
		e = 1
	}
	return net.HardwareAddr{0x02, 0x53, byte(link >> 8), byte(link), 0, e}
}

func (t *Testbed) build() error {
	p := t.Plan
	for _, n := range p.Nodes {
		h, err := nsenter.New(NsName(t.Name, n.Name))
		if err != nil {
			return err
		}
		t.ns = append(t.ns, h)
		nh, err := netlink.NewHandleAt(h)
		if err != nil {
			return fmt.Errorf("netlink in %s: %w", n.Name, err)
		}
		t.nl = append(t.nl, nh)
		// Before any interface exists, so every interface inherits the defaults. IPv6 off keeps
		// links silent (no ND/MLD), so interface counters count only test traffic.
		kv := [][2]string{
			{"net/ipv6/conf/all/disable_ipv6", "1"}, {"net/ipv6/conf/default/disable_ipv6", "1"},
			{"net/ipv4/conf/all/rp_filter", "0"}, {"net/ipv4/conf/default/rp_filter", "0"},
		}
		if n.Router {
			kv = append(kv, [][2]string{
				{"net/ipv4/ip_forward", "1"},
				{"net/ipv4/fib_multipath_hash_policy", "1"}, // L4 hash: the UDP source port picks the path
				// A nexthop whose link lost carrier (far end failed) is skipped, not blackholed.
				{"net/ipv4/conf/all/ignore_routes_with_linkdown", "1"},
				{"net/ipv4/conf/default/ignore_routes_with_linkdown", "1"},
			}...)
		}
		if err := writeSysctls(h, kv); err != nil {
			return fmt.Errorf("%s: %w", n.Name, err)
		}
		lo, err := nh.LinkByName("lo")
		if err == nil {
			err = nh.LinkSetUp(lo)
		}
		if err != nil {
			return fmt.Errorf("%s: lo up: %w", n.Name, err)
		}
	}
	for i, l := range p.Links {
		v := &netlink.Veth{
			LinkAttrs:        netlink.LinkAttrs{Name: l.AIf, MTU: p.Spec.MTU, HardwareAddr: mac(i, false)},
			PeerName:         l.BIf,
			PeerHardwareAddr: mac(i, true),
			PeerNamespace:    netlink.NsFd(t.ns[l.B]),
			PeerMTU:          uint32(p.Spec.MTU),
		}
		if err := t.nl[l.A].LinkAdd(v); err != nil {
			return fmt.Errorf("link %s: veth: %w", l.Name, err)
		}
		for _, end := range []bool{false, true} {
			node, ifn, addr := l.A, l.AIf, l.AAddr
			if end {
				node, ifn, addr = l.B, l.BIf, l.BAddr
			}
			lk, err := t.nl[node].LinkByName(ifn)
			if err != nil {
				return fmt.Errorf("link %s: %w", l.Name, err)
			}
			if addr.IsValid() && !p.Nodes[node].Switch {
				if err := t.nl[node].AddrAdd(lk, &netlink.Addr{IPNet: ipnet(addr)}); err != nil {
					return fmt.Errorf("link %s: address %s: %w", l.Name, addr, err)
				}
			}
			if !p.Nodes[node].Switch && !p.Nodes[node].Router {
				// A host's NIC puts wire-size frames on the link: a UDP GSO send (the
				// daemon's EV sockets batch same-EV packets that way) would otherwise
				// cross the veth as one super-frame of up to 64 KiB, which the userspace
				// switch cannot take (it dropped them as truncated) and a port model would
				// see as one packet. One segment per skb makes the kernel segment in
				// software before the veth, as a NIC with segmentation offload would.
				if err := setGSOMaxSegs(t.nl[node], lk, 1); err != nil {
					return fmt.Errorf("link %s: gso_max_segs: %w", l.Name, err)
				}
			}
			if err := t.nl[node].LinkSetUp(lk); err != nil {
				return fmt.Errorf("link %s: up: %w", l.Name, err)
			}
		}
		if err := t.setRate(i, l.Rate); err != nil {
			return err
		}
	}
	if p.Spec.Kind == KindStar && p.Spec.Mode == ModeKernel {
		if err := t.bridge(); err != nil {
			return err
		}
	}
	if err := t.neighbours(-1); err != nil {
		return err
	}
	return t.routes(-1)
}

// bridge makes the star's switch a Linux bridge (kernel mode).
func (t *Testbed) bridge() error {
	sw := t.Plan.NodeIndex("sw0")
	h := t.nl[sw]
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0", MTU: t.Plan.Spec.MTU}}
	if err := h.LinkAdd(br); err != nil {
		return fmt.Errorf("sw0: bridge: %w", err)
	}
	for _, l := range t.Plan.Links {
		lk, err := h.LinkByName(l.BIf)
		if err != nil {
			return err
		}
		if err := h.LinkSetMaster(lk, br); err != nil {
			return fmt.Errorf("sw0: enslave %s: %w", l.BIf, err)
		}
	}
	return h.LinkSetUp(br)
}

// neighbours installs permanent ARP entries on both ends of every addressed link touching
// node (all nodes when node < 0), and between star hosts, so no frame waits for ARP.
func (t *Testbed) neighbours(node int) error {
	p := t.Plan
	add := func(n int, ifn string, ip netip.Addr, hw net.HardwareAddr) error {
		if p.Nodes[n].Switch {
			return nil // a userspace switch knows its neighbours from the plan
		}
		lk, err := t.nl[n].LinkByName(ifn)
		if err != nil {
			return err
		}
		err = t.nl[n].NeighSet(permanentNeigh(lk.Attrs().Index, ip, hw))
		if err != nil {
			return fmt.Errorf("%s: neighbour %s: %w", p.Nodes[n].Name, ip, err)
		}
		return nil
	}
	for i, l := range p.Links {
		if node >= 0 && l.A != node && l.B != node {
			continue
		}
		if l.AAddr.IsValid() && l.BAddr.IsValid() {
			if err := add(l.A, l.AIf, l.BAddr.Addr(), mac(i, true)); err != nil {
				return err
			}
			if err := add(l.B, l.BIf, l.AAddr.Addr(), mac(i, false)); err != nil {
				return err
			}
		}
	}
	if p.Spec.Kind == KindStar {
		for i, a := range p.Links {
			for j, b := range p.Links {
				if i != j && (node < 0 || a.A == node) {
					if err := add(a.A, a.AIf, b.AAddr.Addr(), mac(j, false)); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// routes installs (replaces) the static routes of node (all nodes when node < 0).
func (t *Testbed) routes(node int) error {
	p := t.Plan
	for _, r := range p.Routes {
		if node >= 0 && r.Node != node || p.Nodes[r.Node].Switch {
			continue
		}
		rt := &netlink.Route{Dst: ipnet(r.Dst)}
		for _, h := range r.Via {
			l := p.Links[h.Link]
			ifn := l.AIf
			if !h.FromA {
				ifn = l.BIf
			}
			lk, err := t.nl[r.Node].LinkByName(ifn)
			if err != nil {
				return err
			}
			if len(r.Via) == 1 {
				rt.LinkIndex, rt.Gw = lk.Attrs().Index, h.Gw.AsSlice()
			} else {
				rt.MultiPath = append(rt.MultiPath, &netlink.NexthopInfo{LinkIndex: lk.Attrs().Index, Gw: h.Gw.AsSlice()})
			}
		}
		if err := t.nl[r.Node].RouteReplace(rt); err != nil {
			return fmt.Errorf("%s: route %s: %w", p.Nodes[r.Node].Name, r.Dst, err)
		}
	}
	return nil
}

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
