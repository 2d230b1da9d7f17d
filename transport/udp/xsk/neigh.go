//go:build linux

package xsk

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Route is how to reach one IPv4 destination from this host: the interface, our source
// address on it and the hop (with both MACs) to put in the frames.
type Route struct {
	Ifindex int
	Hop     Hop
}

// Resolve finds the route to dst, our address and MAC on its interface and the next
// hop's MAC from the neighbour table. If the table has no usable entry and wait > 0 it
// provokes ARP with one empty datagram to dst's discard port (9), from the calling
// thread's namespace, and waits up to wait. nl may be nil: a handle is opened in the
// calling thread's network namespace.
func Resolve(nl *netlink.Handle, dst netip.Addr, wait time.Duration) (Route, error) {
	if !dst.Is4() {
		return Route{}, fmt.Errorf("xsk: resolve %v: only IPv4", dst)
	}
	if nl == nil {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return Route{}, fmt.Errorf("xsk: netlink: %w", err)
		}
		defer h.Close()
		nl = h
	}
	rs, err := nl.RouteGet(dst.AsSlice())
	if err != nil || len(rs) == 0 {
		return Route{}, fmt.Errorf("xsk: no route to %v: %v", dst, err)
	}
	r := rs[0]
	link, err := nl.LinkByIndex(r.LinkIndex)
	if err != nil {
		return Route{}, fmt.Errorf("xsk: route to %v: link %d: %w", dst, r.LinkIndex, err)
	}
	var out Route
	out.Ifindex = r.LinkIndex
	if len(link.Attrs().HardwareAddr) != 6 {
		return Route{}, fmt.Errorf("xsk: %s has no Ethernet address", link.Attrs().Name)
	}
	copy(out.Hop.SrcMAC[:], link.Attrs().HardwareAddr)
	out.Hop.Dst = dst
	src, ok := netip.AddrFromSlice(r.Src)
	if !ok {
		return Route{}, fmt.Errorf("xsk: route to %v has no source address", dst)
	}
	out.Hop.Src = src.Unmap()
	next := dst
	if gw, ok := netip.AddrFromSlice(r.Gw); ok && !gw.IsUnspecified() {
		next = gw.Unmap()
	}
	deadline := time.Now().Add(wait)
	poked := false
	for {
		if mac, ok := lookupNeigh(nl, r.LinkIndex, next); ok {
			out.Hop.DstMAC = mac
			return out, nil
		}
		if time.Now().After(deadline) {
			return Route{}, fmt.Errorf("xsk: no neighbour entry for %v on %s after %v", next, link.Attrs().Name, wait)
		}
		if !poked && wait > 0 {
			poked = true
			if c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9))); err == nil {
				c.Write(nil)
				c.Close()
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func lookupNeigh(nl *netlink.Handle, ifindex int, ip netip.Addr) ([6]byte, bool) {
	ns, err := nl.NeighList(ifindex, netlink.FAMILY_V4)
	if err != nil {
		return [6]byte{}, false
	}
	for _, n := range ns {
		a, ok := netip.AddrFromSlice(n.IP)
		if !ok || a.Unmap() != ip || len(n.HardwareAddr) != 6 {
			continue
		}
		if n.State&(netlink.NUD_REACHABLE|netlink.NUD_STALE|netlink.NUD_DELAY|netlink.NUD_PROBE|netlink.NUD_PERMANENT|netlink.NUD_NOARP) != 0 {
			return [6]byte(n.HardwareAddr), true
		}
	}
	return [6]byte{}, false
}

// Probe tells whether an AF_XDP socket can be bound to cfg's interface queue in this
// network namespace: nil, or an *Error naming the step that failed and why (kernel,
// permission, driver), for a caller that then falls back to UDP sockets.
func Probe(cfg Config) error {
	cfg.Frames = min(max(cfg.Frames, 0), 64)
	if cfg.Frames == 0 {
		cfg.Frames = 64
	}
	cfg.RingSize = 64
	s, err := Open(cfg)
	if err != nil {
		return err
	}
	return s.Close()
}
