//go:build linux

package udp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// The raw carrier sends every packet through one raw socket with IP_HDRINCL (IPv4) or
// IPV6_HDRINCL (IPv6), so each packet can carry any UDP source port: EV i leaves from
// EVPortBase+i for pools far larger than a socket per port allows. The IP+UDP header is
// a template written once and patched per packet (destination, ports,
// lengths, TOS, IPv6 UDP checksum), then sent as the first iovec ahead of the caller's
// payload, so nothing is copied or allocated. Receiving still uses the UDP listen socket.
// The source ports are not bound: another program may bind one of them meanwhile.

const rawHdrMax = 48 // IPv6 (40) + UDP (8)

// openRaw creates the raw send socket and the header template.
func (c *Conn) openRaw() (*sock, error) {
	cfg := &c.cfg
	if cfg.EVPortBase == 0 {
		cfg.EVPortBase = c.local.Port() + 1
	}
	if int(cfg.EVPortBase)+cfg.EVS-1 > 65535 {
		return nil, fmt.Errorf("Config.EVPortBase %d + EVS %d exceeds port 65535", cfg.EVPortBase, cfg.EVS)
	}
	if lp := c.local.Port(); lp >= cfg.EVPortBase && int(lp) < int(cfg.EVPortBase)+cfg.EVS {
		return nil, fmt.Errorf("listen port %d lies inside the EV port range %d..%d", lp, cfg.EVPortBase, int(cfg.EVPortBase)+cfg.EVS-1)
	}
	c.raw = true
	family := unix.AF_INET
	if c.v6 {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("raw socket: %w (needs CAP_NET_RAW)", err)
		}
		return nil, fmt.Errorf("raw socket: %w", err)
	}
	if c.v6 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_HDRINCL, 1); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("IPV6_HDRINCL: %w", err)
		}
	}
	c.setupTx(fd)
	f := os.NewFile(uintptr(fd), "raw")
	pc, err := net.FilePacketConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("FilePacketConn: %w", err)
	}
	s, err := pollSock(pc)
	if err != nil {
		return nil, err
	}
	c.rawT, err = rawTemplate(c.local.Addr(), cfg.EVPortBase, c.caps.DF)
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// rawTemplate writes an IP+UDP header from src (IPv4: with the Don't Fragment flag if
// df; TTL or hop limit 64; destination zero, port 9); rawHeader fills in the rest.
// TestRawHeaderMatchesGopacket checks the result against gopacket's serialisation.
func rawTemplate(src netip.Addr, sport uint16, df bool) ([]byte, error) {
	if !src.IsValid() {
		return nil, fmt.Errorf("header template: no source address")
	}
	var h []byte
	if src.Is4() || src.Is4In6() {
		h = make([]byte, ipv4Hdr+udpHdr)
		h[0] = 4<<4 | ipv4Hdr/4
		binary.BigEndian.PutUint16(h[2:], ipv4Hdr+udpHdr)
		if df {
			h[6] = 0x40
		}
		h[8], h[9] = 64, unix.IPPROTO_UDP
		a := src.Unmap().As4()
		copy(h[12:16], a[:])
	} else {
		h = make([]byte, ipv6Hdr+udpHdr)
		h[0] = 6 << 4
		binary.BigEndian.PutUint16(h[4:], udpHdr)
		h[6], h[7] = unix.IPPROTO_UDP, 64
		a := src.As16()
		copy(h[8:24], a[:])
	}
	u := h[len(h)-udpHdr:]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], 9)
	binary.BigEndian.PutUint16(u[4:], udpHdr)
	return h, nil
}

// rawHeader writes p's IP+UDP header into slot and returns it.
func (c *Conn) rawHeader(slot []byte, p *Packet, dst netip.Addr, tos uint8) []byte {
	sport := c.EVPort(p.EV)
	ulen := uint16(udpHdr + p.N)
	if !c.v6 {
		h := slot[:ipv4Hdr+udpHdr]
		copy(h, c.rawT)
		h[1] = tos
		binary.BigEndian.PutUint16(h[2:], ipv4Hdr+ulen) // the kernel rewrites it, and the checksum
		a := dst.Unmap().As4()
		copy(h[16:20], a[:])
		u := h[ipv4Hdr:]
		binary.BigEndian.PutUint16(u[0:], sport)
		binary.BigEndian.PutUint16(u[2:], p.Addr.Port())
		binary.BigEndian.PutUint16(u[4:], ulen)
		binary.BigEndian.PutUint16(u[6:], 0) // IPv4 allows no UDP checksum
		return h
	}
	h := slot[:ipv6Hdr+udpHdr]
	copy(h, c.rawT)
	binary.BigEndian.PutUint32(h[0:], 6<<28|uint32(tos)<<20)
	binary.BigEndian.PutUint16(h[4:], ulen)
	a := dst.As16()
	copy(h[24:40], a[:])
	u := h[ipv6Hdr:]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], p.Addr.Port())
	binary.BigEndian.PutUint16(u[4:], ulen)
	binary.BigEndian.PutUint16(u[6:], 0)
	// IPv6 requires the UDP checksum: pseudo-header (addresses, length, next header),
	// UDP header and payload.
	sum := csumAdd(0, h[8:40])
	sum += uint32(ulen) + unix.IPPROTO_UDP
	sum = csumAdd(sum, u[:udpHdr])
	sum = csumAdd(sum, p.Buf[:p.N])
	ck := ^csumFold(sum)
	if ck == 0 {
		ck = 0xffff
	}
	binary.BigEndian.PutUint16(u[6:], ck)
	return h
}

// csumAdd adds b as big-endian 16-bit words (odd tail padded with zero) to a 32-bit sum,
// folding as it goes so it never overflows.
func csumAdd(sum uint32, b []byte) uint32 {
	s := uint64(sum)
	for len(b) >= 8 {
		s += uint64(binary.BigEndian.Uint32(b)) + uint64(binary.BigEndian.Uint32(b[4:]))
		b = b[8:]
	}
	for len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	for s>>32 != 0 {
		s = s&0xffffffff + s>>32
	}
	return uint32(s)
}

func csumFold(s uint32) uint16 {
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}
