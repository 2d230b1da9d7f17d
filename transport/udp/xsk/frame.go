//go:build linux

package xsk

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// HeaderLen is the Ethernet + IPv4 (no options) + UDP header length of the frames UDP4
// builds.
const HeaderLen = 14 + 20 + 8

// Hop is where IPv4 frames of one flow go: our and the next hop's MAC, our and the
// destination's address.
type Hop struct {
	SrcMAC, DstMAC [6]byte
	Src, Dst       netip.Addr // IPv4
}

// PutUDP4 writes the Ethernet, IPv4 and UDP headers of a datagram with payloadLen bytes of
// payload into b[:HeaderLen]: Don't Fragment, TTL 64, the TOS byte (DSCP<<2 | ECN), the IP
// header checksum; the UDP checksum is 0, which IPv4 allows (RFC 768), so the payload is
// not read. It returns HeaderLen, or 0 if b is too short or the datagram too long.
func PutUDP4(b []byte, h *Hop, srcPort, dstPort uint16, tos uint8, payloadLen int) int {
	if len(b) < HeaderLen || payloadLen < 0 || payloadLen > 65535-28 {
		return 0
	}
	_ = b[HeaderLen-1]
	copy(b[0:6], h.DstMAC[:])
	copy(b[6:12], h.SrcMAC[:])
	b[12], b[13] = 0x08, 0x00
	ip := b[14:34]
	ip[0] = 0x45
	ip[1] = tos
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+payloadLen))
	ip[4], ip[5] = 0, 0 // ID: unused with DF (RFC 6864)
	ip[6], ip[7] = 0x40, 0
	ip[8] = 64
	ip[9] = 17
	ip[10], ip[11] = 0, 0
	s4, d4 := h.Src.As4(), h.Dst.As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
	u := b[34:42]
	binary.BigEndian.PutUint16(u[0:], srcPort)
	binary.BigEndian.PutUint16(u[2:], dstPort)
	binary.BigEndian.PutUint16(u[4:], uint16(8+payloadLen))
	u[6], u[7] = 0, 0
	return HeaderLen
}

// ipChecksum is the Internet checksum of an IPv4 header (its checksum field included: a
// valid header sums to 0).
func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// Datagram is what ParseUDP4 read from a frame.
type Datagram struct {
	Src     netip.AddrPort
	Dst     netip.AddrPort
	TOS     uint8
	TTL     uint8
	Payload []byte // a view into the frame (ParseUDP4 only)

	poff, plen int // payload offset in the frame and length
}

// Malformed says why ParseUDP4 refused a frame.
type Malformed uint8

// Reasons for refusing a frame.
const (
	OK          Malformed = iota
	Short                 // shorter than its headers
	NotIPv4               // not an IPv4 Ethernet frame
	BadIPHeader           // version, header length, total length or checksum wrong
	NotUDP                // another protocol
	Fragment              // an IPv4 fragment
	BadUDPLen             // the UDP length disagrees with the IP length
)

// ParseUDP4 reads an Ethernet + IPv4 + UDP frame received from the network, so trusts
// nothing: lengths are checked against each other and the frame, the IP header checksum
// is verified, fragments are refused. The UDP checksum is not verified (on veth the
// kernel may leave it partial, and a real NIC's frame CRC guards the bytes); the smartt
// header's own checks come next.
func ParseUDP4(f []byte) (Datagram, Malformed) {
	d, why := parseUDP4(f, len(f))
	if why == OK {
		d.Payload = f[d.poff : d.poff+d.plen : d.poff+d.plen]
	}
	return d, why
}

// parseUDP4 is ParseUDP4 for a frame of total bytes whose first part, f, holds at least
// the headers (the rest may be in further multi-buffer frames).
func parseUDP4(f []byte, total int) (Datagram, Malformed) {
	if len(f) < HeaderLen || total < len(f) {
		return Datagram{}, Short
	}
	if f[12] != 0x08 || f[13] != 0x00 {
		return Datagram{}, NotIPv4
	}
	ip := f[14:]
	iplen := total - 14
	ihl := int(ip[0]&0x0f) * 4
	if ip[0]>>4 != 4 || ihl < 20 || len(ip) < ihl+8 {
		return Datagram{}, BadIPHeader
	}
	tot := int(binary.BigEndian.Uint16(ip[2:]))
	if tot < ihl+8 || tot > iplen || ipChecksum(ip[:ihl]) != 0 {
		return Datagram{}, BadIPHeader
	}
	if ip[9] != 17 {
		return Datagram{}, NotUDP
	}
	if binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 {
		return Datagram{}, Fragment
	}
	u := ip[ihl:]
	ul := int(binary.BigEndian.Uint16(u[4:]))
	if ul < 8 || ul > tot-ihl {
		return Datagram{}, BadUDPLen
	}
	src := netip.AddrFrom4([4]byte(ip[12:16]))
	dst := netip.AddrFrom4([4]byte(ip[16:20]))
	return Datagram{
		Src:  netip.AddrPortFrom(src, binary.BigEndian.Uint16(u[0:])),
		Dst:  netip.AddrPortFrom(dst, binary.BigEndian.Uint16(u[2:])),
		TOS:  ip[1],
		TTL:  ip[8],
		poff: 14 + ihl + 8,
		plen: ul - 8,
	}, OK
}

// ErrTooBig is returned for a datagram longer than IPv4 allows.
var ErrTooBig = errors.New("xsk: datagram too long for IPv4")
