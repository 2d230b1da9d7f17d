package uswitch

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sort"
	"sync/atomic"
)

// NextHop is one way out of an L3 switch: a port and the MAC address of the neighbour
// behind it.
type NextHop struct {
	Port int
	MAC  [6]byte
}

// L3Route sends packets for Dst to one of Hops (equal cost: the ECMP choice picks one).
type L3Route struct {
	Dst  netip.Prefix
	Hops []NextHop
}

// Choose picks one of n equal-cost next hops for a packet's 5-tuple (IPv4 addresses as
// big-endian integers; ports 0 for protocols without them). The shared switch-port model
// provides it, with a per-switch salt:
//
//	func(src, dst uint32, proto uint8, sp, dp uint16, n int) int {
//		return switchport.Pick(switchport.Hash4(salt, src, dst, proto, sp, dp), n)
//	}
type Choose func(src, dst uint32, proto uint8, sport, dport uint16, n int) int

// L3Router forwards IPv4 like a router with static routes: longest-prefix match, ECMP
// over the 5-tuple, TTL decrement, and the Ethernet addresses rewritten for the next hop.
// Anything else (ARP, IPv6) is dropped: the testbed installs static neighbours.
type L3Router struct {
	portMAC [][6]byte
	routes  []l3route // longest prefix first
	choose  Choose
}

type l3route struct {
	net, mask uint32
	hops      []NextHop
	down      *atomic.Uint64 // bit i: hops[i] excluded (routing converged around a failure)
}

// NewL3Router builds a router whose port i has address portMACs[i].
func NewL3Router(portMACs [][6]byte, routes []L3Route, choose Choose) (*L3Router, error) {
	if choose == nil {
		return nil, fmt.Errorf("uswitch: L3 router needs an ECMP choice function")
	}
	r := &L3Router{portMAC: portMACs, choose: choose}
	for _, rt := range routes {
		if !rt.Dst.Addr().Is4() || len(rt.Hops) == 0 {
			return nil, fmt.Errorf("uswitch: route %v: need an IPv4 prefix and at least one next hop", rt.Dst)
		}
		for _, h := range rt.Hops {
			if h.Port < 0 || h.Port >= len(portMACs) {
				return nil, fmt.Errorf("uswitch: route %v: port %d out of range [0, %d)", rt.Dst, h.Port, len(portMACs))
			}
		}
		a := rt.Dst.Masked().Addr().As4()
		mask := uint32(0)
		if rt.Dst.Bits() > 0 {
			mask = ^uint32(0) << (32 - rt.Dst.Bits())
		}
		r.routes = append(r.routes, l3route{binary.BigEndian.Uint32(a[:]), mask, rt.Hops, new(atomic.Uint64)})
	}
	sort.SliceStable(r.routes, func(i, j int) bool { return r.routes[i].mask > r.routes[j].mask })
	return r, nil
}

// Route looks the destination up, picks a next hop and rewrites the frame for it.
func (r *L3Router) Route(f *Frame, in int) int {
	d := f.Data()
	if len(d) < ethLen+20 || binary.BigEndian.Uint16(d[12:]) != etherIPv4 || d[ethLen]>>4 != 4 {
		return Drop
	}
	ip := d[ethLen:]
	dst := binary.BigEndian.Uint32(ip[16:])
	var rt *l3route
	for i := range r.routes {
		if dst&r.routes[i].mask == r.routes[i].net {
			rt = &r.routes[i]
			break
		}
	}
	if rt == nil || ip[8] <= 1 {
		return Drop // no route, or the TTL runs out here
	}
	h := rt.hops[0]
	if down := rt.down.Load(); down != 0 {
		return r.routeLive(f, ip, dst, rt, down)
	}
	if len(rt.hops) > 1 {
		var sp, dp uint16
		ihl := int(ip[0]&0x0f) * 4
		proto := ip[9]
		if (proto == 6 || proto == 17) && binary.BigEndian.Uint16(ip[6:])&0x1fff == 0 && len(ip) >= ihl+4 {
			sp, dp = binary.BigEndian.Uint16(ip[ihl:]), binary.BigEndian.Uint16(ip[ihl+2:])
		}
		k := r.choose(binary.BigEndian.Uint32(ip[12:]), dst, proto, sp, dp, len(rt.hops))
		if k < 0 || k >= len(rt.hops) {
			return Drop
		}
		h = rt.hops[k]
	}
	return r.rewrite(d, ip, h)
}

// routeLive is Route over the hops not excluded by down.
func (r *L3Router) routeLive(f *Frame, ip []byte, dst uint32, rt *l3route, down uint64) int {
	var live [64]int
	n := 0
	for i := range rt.hops {
		if i >= 64 || down&(1<<i) == 0 {
			live[n] = i
			n++
		}
	}
	if n == 0 {
		return Drop
	}
	h := rt.hops[live[0]]
	if n > 1 {
		sp, dp, proto := ports(ip)
		k := r.choose(binary.BigEndian.Uint32(ip[12:]), dst, proto, sp, dp, n)
		if k < 0 || k >= n {
			return Drop
		}
		h = rt.hops[live[k]]
	}
	return r.rewrite(f.Data(), ip, h)
}

func ports(ip []byte) (sp, dp uint16, proto uint8) {
	ihl := int(ip[0]&0x0f) * 4
	proto = ip[9]
	if (proto == 6 || proto == 17) && binary.BigEndian.Uint16(ip[6:])&0x1fff == 0 && len(ip) >= ihl+4 {
		sp, dp = binary.BigEndian.Uint16(ip[ihl:]), binary.BigEndian.Uint16(ip[ihl+2:])
	}
	return sp, dp, proto
}

// SetDown excludes (or re-admits) the next hops through port from the routes to
// destinations in dst (every route when dst is not valid), as routing does once it has
// converged around a failed link. Safe while the switch runs.
func (r *L3Router) SetDown(dst netip.Prefix, port int, down bool) {
	for i := range r.routes {
		rt := &r.routes[i]
		if dst.IsValid() {
			a := dst.Masked().Addr().As4()
			if binary.BigEndian.Uint32(a[:])&rt.mask != rt.net {
				continue
			}
		}
		for j, h := range rt.hops {
			if h.Port != port || j >= 64 {
				continue
			}
			for {
				old := rt.down.Load()
				nw := old &^ (1 << j)
				if down {
					nw = old | 1<<j
				}
				if rt.down.CompareAndSwap(old, nw) {
					break
				}
			}
		}
	}
}

func (r *L3Router) rewrite(d, ip []byte, h NextHop) int {
	old := binary.BigEndian.Uint16(ip[8:])
	ip[8]--
	updateCsum(ip[10:], old, binary.BigEndian.Uint16(ip[8:]))
	copy(d[0:6], h.MAC[:])
	copy(d[6:12], r.portMAC[h.Port][:])
	return h.Port
}
