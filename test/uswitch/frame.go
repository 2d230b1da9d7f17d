package uswitch

import (
	"encoding/binary"

	"github.com/smartt-transport/smartt/transport/wire"
)

// Offsets into an untagged Ethernet frame carrying IPv4.
const (
	ethLen      = 14
	etherIPv4   = 0x0800
	protoUDP    = 17
	wireDataV1  = 0x11 // byte 0 of a version-1 DATA packet (docs/wire.md)
	wireFlagTrm = 0x08 // FlagTrimmed in byte 1
	// WireHeaderLen is the part of a DATA packet that survives trimming (docs/wire.md).
	WireHeaderLen = 64
)

// ipv4 returns the offset of the UDP header and the IP header length, or ok false when the
// frame is not an unfragmented IPv4/UDP packet that holds its headers whole.
func (f *Frame) udp() (ihl, udpOff int, ok bool) {
	d := f.Data()
	if len(d) < ethLen+20+8 || binary.BigEndian.Uint16(d[12:]) != etherIPv4 || d[ethLen]>>4 != 4 {
		return 0, 0, false
	}
	ihl = int(d[ethLen]&0x0f) * 4
	if ihl < 20 || len(d) < ethLen+ihl+8 || d[ethLen+9] != protoUDP ||
		binary.BigEndian.Uint16(d[ethLen+6:])&0x3fff != 0 { // MF or offset: a fragment
		return 0, 0, false
	}
	return ihl, ethLen + ihl, true
}

// ECT reports whether the frame is IPv4 with an ECN-capable transport code point
// (ECT(0), ECT(1), or already CE).
func (f *Frame) ECT() bool {
	d := f.Data()
	return len(d) >= ethLen+20 && binary.BigEndian.Uint16(d[12:]) == etherIPv4 && d[ethLen+1]&3 != 0
}

// SetCE marks an ECN-capable IPv4 frame Congestion Experienced, updating the IP header
// checksum incrementally (RFC 1624); it returns false (and changes nothing) otherwise.
func (f *Frame) SetCE() bool {
	if !f.ECT() {
		return false
	}
	d := f.Data()
	old := binary.BigEndian.Uint16(d[ethLen:])
	d[ethLen+1] |= 3
	updateCsum(d[ethLen+10:], old, binary.BigEndian.Uint16(d[ethLen:]))
	return true
}

// IsData reports whether the frame is one of our DATA packets over IPv4/UDP (a returned
// trimmed header is not: it travels as control traffic).
func (f *Frame) IsData() bool {
	_, u, ok := f.udp()
	d := f.Data()
	return ok && len(d) > u+9 && d[u+8] == wireDataV1 && d[u+9]&(wireFlagTrm|wireFlagRet) != wireFlagTrm|wireFlagRet
}

// Trim cuts a DATA packet to its 64-byte header (and its INT block, if it carries one:
// wire.TrimmedLen), sets FlagTrimmed, and, if dscp is not 0,
// that DSCP (the trim code point); IP and UDP lengths and both checksums are rewritten (the
// UDP checksum in full, so no offload request is left). It returns false and leaves the
// frame alone if it is not a DATA packet or is already that short.
func (f *Frame) Trim(dscp uint8) bool {
	if !f.IsData() {
		return false
	}
	ihl, u, _ := f.udp()
	d := f.Data()
	hl := wire.TrimmedLen(d[u+8:])
	keep := u + 8 + hl
	if len(d) <= keep {
		return false
	}
	f.SetLen(keep)
	d = f.Data()
	d[u+8+1] |= wireFlagTrm
	ip := d[ethLen : ethLen+ihl]
	if dscp != 0 {
		ip[1] = dscp<<2 | ip[1]&3
	}
	binary.BigEndian.PutUint16(ip[2:], uint16(ihl+8+hl))
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ^fold(sum16(ip)))
	udp := d[u:]
	binary.BigEndian.PutUint16(udp[4:], uint16(8+hl))
	udp[6], udp[7] = 0, 0
	var pseudo [12]byte
	copy(pseudo[:8], ip[12:20])
	pseudo[9] = protoUDP
	binary.BigEndian.PutUint16(pseudo[10:], uint16(8+hl))
	c := ^fold(sum16(pseudo[:]) + sum16(udp))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(udp[6:], c)
	f.buf[0] &^= vnetNeedsCsum | vnetDataValid
	return true
}

// sum16 is the one's-complement sum of b as big-endian 16-bit words, not yet folded.
func sum16(b []byte) uint32 {
	var s uint32
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// updateCsum rewrites the checksum at c after a 16-bit word changed from old to new.
func updateCsum(c []byte, old, new uint16) {
	s := uint32(^binary.BigEndian.Uint16(c)) + uint32(^old) + uint32(new)
	binary.BigEndian.PutUint16(c, ^fold(s))
}
