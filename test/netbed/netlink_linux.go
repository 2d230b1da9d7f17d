package netbed

import (
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// setGSOMaxSegs caps the GSO segments per skb of link lk.
func setGSOMaxSegs(h *netlink.Handle, lk netlink.Link, n int) error {
	return h.LinkSetGSOMaxSegs(lk, n)
}

// permanentNeigh is a static IPv4 neighbour entry: ip at hw on interface index.
func permanentNeigh(index int, ip netip.Addr, hw net.HardwareAddr) *netlink.Neigh {
	return &netlink.Neigh{LinkIndex: index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: ip.AsSlice(), HardwareAddr: hw}
}
