package netbed

import (
	"fmt"
	"net/netip"

	"github.com/smartt-transport/smartt/config"
)

// Topology kinds a Spec can describe.
const (
	KindPair      = "pair"      // two hosts back to back, one link
	KindStar      = "star"      // hosts on one switch namespace (the userspace switch's home)
	KindLeafSpine = "leafspine" // leaves with hosts, every leaf linked to every spine
	KindFatTree   = "fattree"   // 2-tier fat tree of radix-k switches (a full-bisection leaf-spine)
)

// Fabric modes.
const (
	ModeKernel   = "kernel"   // leaves and spines are Linux routers with multipath routes
	ModeEmulated = "emulated" // switches are the project's userspace switch (test/uswitch)
)

// DefaultMTU lets a 4 KiB payload plus our headers travel in one frame.
const DefaultMTU = 9000

// Spec describes a testbed topology. It is a plain struct with YAML tags so that the
// simulator's scenario file can embed it (field names: kind, mode, hosts, hosts_per_leaf,
// leaves, spines, k, oversubscription, link_rate, mtu).
type Spec struct {
	Kind             string      `yaml:"kind"`             // pair | star | leafspine | fattree
	Mode             string      `yaml:"mode"`             // kernel (default) | emulated
	Hosts            int         `yaml:"hosts"`            // star: number of hosts (default 2)
	HostsPerLeaf     int         `yaml:"hosts_per_leaf"`   // leafspine
	Leaves           int         `yaml:"leaves"`           // leafspine
	Spines           int         `yaml:"spines"`           // leafspine
	K                int         `yaml:"k"`                // fattree: switch radix, even
	Oversubscription float64     `yaml:"oversubscription"` // leafspine: host:uplink capacity, default 1
	LinkRate         config.Rate `yaml:"link_rate"`        // host link rate; 0 = unshaped
	MTU              int         `yaml:"mtu"`              // default 9000
}

// Node is one namespace of a testbed.
type Node struct {
	Name   string // e.g. h0, leaf1, spine3, sw0
	Router bool   // forwards IP in the kernel (leaf, spine)
	Switch bool   // home of a userspace switch (no kernel forwarding)
	Addr   netip.Addr
}

// Link is one veth pair between two nodes; A is the lower tier (host below leaf below spine).
type Link struct {
	Name         string // "<A>-<B>", e.g. leaf0-spine2
	A, B         int    // node indices
	AIf, BIf     string // interface names inside the nodes' namespaces
	AAddr, BAddr netip.Prefix
	Rate         config.Rate // both directions; 0 = unshaped
}

// Route is a static route of one node: to Dst via one or more links (multipath when more).
// Routes of switch nodes are not installed in the kernel; the userspace switch gets them.
type Route struct {
	Node int
	Dst  netip.Prefix
	Via  []Hop
}

// Hop is one nexthop: leave by link Link from node end A (FromA) or B, to the gateway Gw.
type Hop struct {
	Link  int
	FromA bool
	Gw    netip.Addr
}

// Plan is a Spec expanded into nodes, links and routes, independent of the kernel.
type Plan struct {
	Spec   Spec
	Nodes  []Node
	Links  []Link
	Routes []Route
}

// Normalize fills defaults and checks ranges; errors name the field and the allowed range.
func (s Spec) Normalize() (Spec, error) {
	if s.Mode == "" {
		s.Mode = ModeKernel
	}
	if s.MTU == 0 {
		s.MTU = DefaultMTU
	}
	if s.MTU < 1280 || s.MTU > 65535 {
		return s, fmt.Errorf("mtu %d out of range [1280, 65535]", s.MTU)
	}
	if s.LinkRate < 0 {
		return s, fmt.Errorf("link_rate %d must not be negative", s.LinkRate)
	}
	if s.Mode != ModeKernel && s.Mode != ModeEmulated {
		return s, fmt.Errorf("mode %q unknown (want %s or %s)", s.Mode, ModeKernel, ModeEmulated)
	}
	switch s.Kind {
	case KindPair:
		if s.Mode == ModeEmulated {
			return s, fmt.Errorf("mode emulated needs a switch; kind pair has none (use star)")
		}
	case KindStar:
		if s.Hosts == 0 {
			s.Hosts = 2
		}
		if s.Hosts < 2 || s.Hosts > 250 {
			return s, fmt.Errorf("hosts %d out of range [2, 250]", s.Hosts)
		}
	case KindFatTree:
		if s.K < 2 || s.K%2 != 0 || s.K > 64 {
			return s, fmt.Errorf("k %d must be even and in [2, 64]", s.K)
		}
		s.Leaves, s.HostsPerLeaf, s.Spines = s.K, s.K/2, s.K/2
		s.Oversubscription = 1
		fallthrough
	case KindLeafSpine:
		if s.Oversubscription == 0 {
			s.Oversubscription = 1
		}
		switch {
		case s.Leaves < 1 || s.Leaves > 250:
			return s, fmt.Errorf("leaves %d out of range [1, 250]", s.Leaves)
		case s.Spines < 1 || s.Spines > 127:
			return s, fmt.Errorf("spines %d out of range [1, 127]", s.Spines)
		case s.HostsPerLeaf < 1 || s.HostsPerLeaf > 127:
			return s, fmt.Errorf("hosts_per_leaf %d out of range [1, 127]", s.HostsPerLeaf)
		case s.Oversubscription < 0.01 || s.Oversubscription > 100:
			return s, fmt.Errorf("oversubscription %g out of range [0.01, 100]", s.Oversubscription)
		}
	case "":
		return s, fmt.Errorf("kind missing (want %s, %s, %s or %s)", KindPair, KindStar, KindLeafSpine, KindFatTree)
	default:
		return s, fmt.Errorf("kind %q unknown (want %s, %s, %s or %s)", s.Kind, KindPair, KindStar, KindLeafSpine, KindFatTree)
	}
	return s, nil
}

// UplinkRate is the rate of each leaf-spine link: the leaf's host capacity divided by the
// number of spines and the oversubscription; 0 when host links are unshaped.
func (s Spec) UplinkRate() config.Rate {
	if s.LinkRate == 0 || s.Spines == 0 {
		return 0
	}
	return config.Rate(float64(s.LinkRate) * float64(s.HostsPerLeaf) / (float64(s.Spines) * s.Oversubscription))
}

// NewPlan expands a spec into nodes, links, addresses and routes.
//
// Addressing (IPv4, all links /31): host i on leaf l has 10.1.l.(2j+1) where j is its index on
// the leaf, the leaf side 10.1.l.(2j); leaf l's link to spine s is 10.2.l.(2s) on the leaf,
// 10.2.l.(2s+1) on the spine. Leaf l routes 10.1.l'.0/24 of every other leaf over all spines;
// spines route 10.1.l.0/24 to leaf l. Star hosts share 10.3.0.0/24 with static neighbours.
// In emulated mode leaves and spines are switch nodes: the same plan, but their addresses
// and routes go to the userspace switch instead of the kernel.
func NewPlan(s Spec) (*Plan, error) {
	s, err := s.Normalize()
	if err != nil {
		return nil, err
	}
	p := &Plan{Spec: s}
	switch s.Kind {
	case KindPair:
		h0 := p.node(Node{Name: "h0", Addr: netip.AddrFrom4([4]byte{10, 1, 0, 0})})
		h1 := p.node(Node{Name: "h1", Addr: netip.AddrFrom4([4]byte{10, 1, 0, 1})})
		p.link(h0, h1, "eth0", "eth0", pfx(10, 1, 0, 0, 31), pfx(10, 1, 0, 1, 31), s.LinkRate)
	case KindStar:
		sw := p.node(Node{Name: "sw0", Switch: true})
		for i := 0; i < s.Hosts; i++ {
			h := p.node(Node{Name: fmt.Sprintf("h%d", i), Addr: netip.AddrFrom4([4]byte{10, 3, 0, byte(i + 1)})})
			p.link(h, sw, "eth0", p.Nodes[h].Name, pfx(10, 3, 0, byte(i+1), 24), netip.Prefix{}, s.LinkRate)
		}
	case KindLeafSpine, KindFatTree:
		emu := s.Mode == ModeEmulated
		leaves := make([]int, s.Leaves)
		spines := make([]int, s.Spines)
		for l := range leaves {
			leaves[l] = p.node(Node{Name: fmt.Sprintf("leaf%d", l), Router: !emu, Switch: emu})
		}
		for sp := range spines {
			spines[sp] = p.node(Node{Name: fmt.Sprintf("spine%d", sp), Router: !emu, Switch: emu})
		}
		for l, leaf := range leaves {
			for j := 0; j < s.HostsPerLeaf; j++ {
				name := fmt.Sprintf("h%d", l*s.HostsPerLeaf+j)
				addr := pfx(10, 1, byte(l), byte(2*j+1), 31)
				h := p.node(Node{Name: name, Addr: addr.Addr()})
				li := p.link(h, leaf, "eth0", name, addr, pfx(10, 1, byte(l), byte(2*j), 31), s.LinkRate)
				p.Routes = append(p.Routes, Route{Node: h, Dst: netip.MustParsePrefix("0.0.0.0/0"),
					Via: []Hop{{Link: li, FromA: true, Gw: p.Links[li].BAddr.Addr()}}})
			}
		}
		up := make([][]int, s.Leaves) // up[l][s] = link index
		for l, leaf := range leaves {
			up[l] = make([]int, s.Spines)
			for sp, spine := range spines {
				up[l][sp] = p.link(leaf, spine, p.Nodes[spine].Name, p.Nodes[leaf].Name,
					pfx(10, 2, byte(l), byte(2*sp), 31), pfx(10, 2, byte(l), byte(2*sp+1), 31), s.UplinkRate())
			}
		}
		for l, leaf := range leaves {
			for l2 := range leaves {
				if l2 == l {
					continue
				}
				r := Route{Node: leaf, Dst: pfx(10, 1, byte(l2), 0, 24)}
				for sp := range spines {
					li := up[l][sp]
					r.Via = append(r.Via, Hop{Link: li, FromA: true, Gw: p.Links[li].BAddr.Addr()})
				}
				p.Routes = append(p.Routes, r)
			}
		}
		for sp, spine := range spines {
			for l := range leaves {
				li := up[l][sp]
				p.Routes = append(p.Routes, Route{Node: spine, Dst: pfx(10, 1, byte(l), 0, 24),
					Via: []Hop{{Link: li, FromA: false, Gw: p.Links[li].AAddr.Addr()}}})
			}
		}
	}
	return p, nil
}

func (p *Plan) node(n Node) int { p.Nodes = append(p.Nodes, n); return len(p.Nodes) - 1 }

func (p *Plan) link(a, b int, aif, bif string, aaddr, baddr netip.Prefix, rate config.Rate) int {
	p.Links = append(p.Links, Link{Name: p.Nodes[a].Name + "-" + p.Nodes[b].Name, A: a, B: b,
		AIf: aif, BIf: bif, AAddr: aaddr, BAddr: baddr, Rate: rate})
	return len(p.Links) - 1
}

// NodeIndex returns the index of the node called name, or -1.
func (p *Plan) NodeIndex(name string) int {
	for i, n := range p.Nodes {
		if n.Name == name {
			return i
		}
	}
	return -1
}

// LinkIndex returns the index of the link called name ("leaf0-spine1"; either order), or -1.
func (p *Plan) LinkIndex(name string) int {
	for i, l := range p.Links {
		if l.Name == name || p.Nodes[l.B].Name+"-"+p.Nodes[l.A].Name == name {
			return i
		}
	}
	return -1
}

// Hosts returns the indices of the host nodes in order.
func (p *Plan) Hosts() []int {
	var hs []int
	for i, n := range p.Nodes {
		if !n.Router && !n.Switch {
			hs = append(hs, i)
		}
	}
	return hs
}

func pfx(a, b, c, d byte, bits int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{a, b, c, d}), bits)
}

func netipPrefix32(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }
