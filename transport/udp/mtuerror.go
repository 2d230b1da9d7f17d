package udp

import (
	"fmt"
	"net/netip"
	"strings"
)

// IP and UDP header sizes.
const (
	ipv4Hdr = 20
	ipv6Hdr = 40
	udpHdr  = 8
)

// Datagrams never fragment. Send sockets set DF (IP_MTU_DISCOVER = IP_PMTUDISC_DO, and
// IPV6_MTU_DISCOVER = IPV6_PMTUDISC_DO plus IPV6_DONTFRAG on IPv6), so a datagram larger
// than the path MTU is refused by the kernel with EMSGSIZE instead of leaving in
// fragments, and a router on the path drops it and reports the smaller MTU (ICMP "packet
// too big"), which lowers the kernel's path MTU for the next send. The raw carrier builds
// its IPv4 header with DF set, and IPV6_HDRINCL never fragments. Open checks the MTU of
// the interfaces the listen address uses against Config.MaxDatagram; a refused send logs
// which interface and MTU it hit and what to change.

// MTUError says datagrams of the configured size do not fit an interface's or a path's MTU.
type MTUError struct {
	Interface string         // the interface ("" if unknown)
	MTU       int            // its MTU, or the path MTU of the route (PathMTU)
	PathMTU   bool           // MTU is the route's path MTU (learned from ICMP or set on the route), smaller than the interface's
	Datagram  int            // UDP payload bytes of the datagram that does not fit
	IPHeader  int            // 20 (IPv4) or 40 (IPv6)
	Headers   int            // bytes of Datagram that are not message payload (Config.HeaderBytes)
	Dst       netip.AddrPort // the destination (a refused send), invalid for the check at Open
	Others    []string       // further interfaces too small ("name mtu N"), at Open
}

// Need is the IP packet size the datagram needs: IP header + UDP header + datagram.
func (e *MTUError) Need() int { return e.IPHeader + udpHdr + e.Datagram }

// MaxPayload is the largest message payload per packet that fits the MTU (with
// Config.HeaderBytes of headers besides it), or 0 if even that does not fit.
func (e *MTUError) MaxPayload() int { return max(0, e.MTU-e.IPHeader-udpHdr-e.Headers) }

// Error names the interface, its MTU, the size needed and the two fixes.
func (e *MTUError) Error() string {
	var b strings.Builder
	where := "interface " + e.Interface
	if e.Interface == "" {
		where = "the egress interface"
	}
	switch {
	case e.PathMTU:
		where = fmt.Sprintf("the path through %s has an MTU of %d", where, e.MTU)
	case e.MTU == 0:
		where += " is smaller (the kernel refused the send with EMSGSIZE)"
	default:
		where += fmt.Sprintf(" has MTU %d", e.MTU)
	}
	fmt.Fprintf(&b, "udp: %d-byte datagrams need %d-byte IP packets (IP %d + UDP %d + datagram), but %s",
		e.Datagram, e.Need(), e.IPHeader, udpHdr, where)
	if e.Dst.IsValid() {
		fmt.Fprintf(&b, " towards %v", e.Dst)
	}
	for _, o := range e.Others {
		fmt.Fprintf(&b, ", %s", o)
	}
	b.WriteString("; DF is set, so they are not fragmented: ")
	dev := e.Interface
	if dev == "" {
		dev = "DEV"
	}
	if e.PathMTU {
		fmt.Fprintf(&b, "enable jumbo frames on every link of the path (MTU %d or more on each switch and router port; `ip route get %v` shows the path MTU)",
			e.Need(), e.Dst.Addr())
	} else {
		fmt.Fprintf(&b, "enable jumbo frames (ip link set dev %s mtu %d or more, and the same MTU on every switch port on the path)", dev, e.Need())
	}
	if e.MTU == 0 {
		b.WriteString(" or lower transport.mtu to fit the path (ip route get DST shows its mtu)")
	} else if e.Headers > 0 {
		if p := e.MaxPayload(); p >= 64 {
			fmt.Fprintf(&b, " or carry at most %d payload bytes per packet (transport.mtu: %d)", p, p)
		}
	} else {
		fmt.Fprintf(&b, " or send datagrams of at most %d bytes", max(0, e.MTU-e.IPHeader-udpHdr))
	}
	return b.String()
}
