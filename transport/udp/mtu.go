//go:build linux

package udp

import (
	"fmt"
	"math/bits"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// setDF sets DF on a send socket and reads it back; it reports whether it holds.
func (c *Conn) setDF(fd int) bool {
	type opt struct{ level, name, val int }
	opts := []opt{{unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO}}
	if c.v6 {
		// A dual-stack socket sends IPv4 too (v4-mapped peers): it needs both levels.
		opts = append(opts, opt{unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO},
			opt{unix.IPPROTO_IPV6, unix.IPV6_DONTFRAG, 1})
		if !c.cfg.Listen.Addr().IsUnspecified() {
			opts = opts[1:] // v6only: IPv4 options do not apply
		}
	}
	for _, o := range opts {
		if err := unix.SetsockoptInt(fd, o.level, o.name, o.val); err != nil {
			c.cfg.Logger.Warn("udp: kernel refused DF (IP_MTU_DISCOVER/IPV6_DONTFRAG); datagrams larger than the path MTU will be fragmented",
				"err", err, "option", o.name)
			return false
		}
		if got, err := unix.GetsockoptInt(fd, o.level, o.name); err != nil || got != o.val {
			c.cfg.Logger.Warn("udp: DF did not stick (IP_MTU_DISCOVER/IPV6_DONTFRAG read back differs); datagrams larger than the path MTU will be fragmented",
				"option", o.name, "want", o.val, "got", got, "err", err)
			return false
		}
	}
	return true
}

// ipHeader is the IP header size of the socket layer's family (IPv6 counts 40 even for
// v4-mapped peers of a dual-stack socket: the check errs on the safe side).
func (c *Conn) ipHeader() int {
	if c.v6 {
		return ipv6Hdr
	}
	return ipv4Hdr
}

// linkInfo is an interface as the MTU check sees it.
type linkInfo struct {
	name     string
	mtu      int
	loopback bool
}

// checkMTU compares the MTU of the interfaces the listen address uses with
// Config.MaxDatagram: the interface holding a specific listen address; for a wildcard
// address (or an address on the loopback interface that is not a loopback address, as
// routed hosts use) every interface that is up, not loopback, and has an address of the
// family. If none of them fits it returns an *MTUError (with DF set nothing could be
// sent); if some do not, it warns naming those. It records the smallest MTU in Caps.
func (c *Conn) checkMTU() error {
	if c.cfg.MaxDatagram <= 0 || c.nl == nil {
		return nil
	}
	need := c.ipHeader() + udpHdr + c.cfg.MaxDatagram
	fam := netlink.FAMILY_V4
	if c.v6 {
		fam = netlink.FAMILY_ALL
	}
	addrs, err := c.nl.AddrList(nil, fam)
	if err != nil {
		c.log.Warn("udp: cannot list addresses for the MTU check", "err", err)
		return nil
	}
	la := c.cfg.Listen.Addr().Unmap()
	byIndex := map[int]linkInfo{}
	link := func(idx int) (linkInfo, bool) {
		if li, ok := byIndex[idx]; ok {
			return li, true
		}
		l, err := c.nl.LinkByIndex(idx)
		if err != nil {
			return linkInfo{}, false
		}
		a := l.Attrs()
		li := linkInfo{name: a.Name, mtu: a.MTU, loopback: a.Flags&net.FlagLoopback != 0}
		if a.Flags&net.FlagUp == 0 {
			return linkInfo{}, false
		}
		byIndex[idx] = li
		return li, true
	}
	var cands []linkInfo
	seen := map[string]bool{}
	if !la.IsUnspecified() {
		for _, a := range addrs {
			ip, ok := netip.AddrFromSlice(a.IP)
			if !ok || ip.Unmap() != la {
				continue
			}
			if li, ok := link(a.LinkIndex); ok && (!li.loopback || la.IsLoopback()) {
				cands = append(cands, li)
				seen[li.name] = true
			}
			break
		}
	}
	if len(cands) == 0 && (la.IsUnspecified() || !la.IsLoopback()) {
		for _, a := range addrs {
			ip, ok := netip.AddrFromSlice(a.IP)
			if !ok || !ip.Unmap().IsGlobalUnicast() || (!c.v6 && !ip.Unmap().Is4()) {
				continue
			}
			li, ok := link(a.LinkIndex)
			if !ok || li.loopback || seen[li.name] {
				continue
			}
			seen[li.name] = true
			cands = append(cands, li)
		}
	}
	var small []linkInfo
	for _, li := range cands {
		if c.caps.LinkMTU == 0 || li.mtu < c.caps.LinkMTU {
			c.caps.LinkMTU = li.mtu
		}
		if li.mtu < need {
			small = append(small, li)
		}
	}
	if len(small) == 0 {
		return nil
	}
	e := &MTUError{Interface: small[0].name, MTU: small[0].mtu, Datagram: c.cfg.MaxDatagram, IPHeader: c.ipHeader(), Headers: c.cfg.HeaderBytes}
	for _, li := range small[1:] {
		e.Others = append(e.Others, fmt.Sprintf("%s has MTU %d", li.name, li.mtu))
	}
	if len(small) == len(cands) && c.caps.DF {
		return e
	}
	// Some interfaces fit: peers reached through the others fail (and say so when they do).
	// Without DF the kernel fragments: say so once here.
	msg := "udp: some interfaces cannot carry full-size datagrams without fragmentation; peers behind them will fail"
	if !c.caps.DF {
		msg = "udp: datagrams will be fragmented on these interfaces (DF is off: udp.disable_df)"
	}
	c.log.Warn(msg, "err", e.Error())
	return nil
}

// tooBig handles a datagram the kernel refused with EMSGSIZE: it counts it and, the first
// time for a destination (and at powers of two of the total), logs which interface and
// MTU it hit and what to change. It returns the error to hand back to the caller.
func (c *Conn) tooBig(dst netip.AddrPort, size int) error {
	n := c.st.txTooBig.Add(1)
	e := &MTUError{MTU: 0, Datagram: size, IPHeader: c.ipHeader(), Headers: c.cfg.HeaderBytes, Dst: dst}
	if dst.Addr().Is4In6() || (dst.Addr().Is4() && !c.v6) {
		e.IPHeader = ipv4Hdr
	}
	_, seen := c.tooBigSeen[dst.Addr()]
	if seen && bits.OnesCount64(n) != 1 {
		return e
	}
	if !seen && len(c.tooBigSeen) < 1024 {
		c.tooBigSeen[dst.Addr()] = struct{}{}
	}
	if c.nl != nil {
		if rs, err := c.nl.RouteGet(dst.Addr().Unmap().AsSlice()); err == nil && len(rs) > 0 {
			if l, err := c.nl.LinkByIndex(rs[0].LinkIndex); err == nil {
				e.Interface, e.MTU = l.Attrs().Name, l.Attrs().MTU
			}
			if rs[0].MTU > 0 && (e.MTU == 0 || rs[0].MTU < e.MTU) {
				e.MTU, e.PathMTU = rs[0].MTU, true
			}
		}
	}
	c.log.Warn("udp: datagram larger than the path MTU not sent", "dst", dst, "datagram", size,
		"interface", e.Interface, "mtu", e.MTU, "refused", n, "err", e.Error())
	return e
}

// Unwrap makes errors.Is(err, unix.EMSGSIZE) hold for a refused send.
func (e *MTUError) Unwrap() error { return unix.EMSGSIZE }
