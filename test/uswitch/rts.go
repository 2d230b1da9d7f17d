package uswitch

import "encoding/binary"

// wireFlagRet is wire.FlagReturned in byte 1 of our header: with FlagTrimmed, a trimmed
// header a return-to-sender switch sent back to its sender.
const wireFlagRet = 0x10

// Returner is a Queue that may hand frames back to the switch to be routed again: the
// trimmed headers of a return-to-sender port (ModelQueue with a model that returns
// them). The switch routes each toward its new destination, the original sender, after
// the Enqueue that produced it.
type Returner interface {
	// TakeReturned returns the next frame to route back, or nil.
	TakeReturned() *Frame
}

// ReturnToSender turns a DATA frame into its trimmed header addressed back to its sender:
// Ethernet, IPv4 and UDP source and destination swapped (the new destination port is the
// header's ReplyPort, the sender's listen port, when it names one), FlagTrimmed and FlagReturned set,
// cut as Trim cuts it (with the trim DSCP if dscp is not 0, lengths and checksums
// rewritten). It returns false and leaves the frame alone if it is not a whole DATA frame.
func (f *Frame) ReturnToSender(dscp uint8) bool {
	if !f.IsData() {
		return false
	}
	ihl, u, _ := f.udp()
	d := f.Data()
	if len(d) <= u+8+WireHeaderLen {
		return false // already a header
	}
	var mac [6]byte
	copy(mac[:], d[0:6])
	copy(d[0:6], d[6:12])
	copy(d[6:12], mac[:])
	ip := d[ethLen : ethLen+ihl]
	var a [4]byte
	copy(a[:], ip[12:16])
	copy(ip[12:16], ip[16:20])
	copy(ip[16:20], a[:])
	sp, dp := binary.BigEndian.Uint16(d[u:]), binary.BigEndian.Uint16(d[u+2:])
	if rp := binary.BigEndian.Uint16(d[u+8+4:]); rp != 0 {
		// The header's ReplyPort: the sender's listen port. Its source port is an EV
		// port, which a daemon only sends from.
		sp = rp
	}
	binary.BigEndian.PutUint16(d[u:], dp)
	binary.BigEndian.PutUint16(d[u+2:], sp)
	d[u+8+1] |= wireFlagRet
	// Trim rewrites both checksums in full (the swaps left the IP checksum valid, and the
	// UDP one is recomputed over the new header).
	return f.Trim(dscp)
}

// Returned reports whether the frame is a returned trimmed header: it travels as control
// traffic (never trimmed or returned again).
func (f *Frame) Returned() bool {
	_, u, ok := f.udp()
	d := f.Data()
	return ok && len(d) > u+9 && d[u+8] == wireDataV1 && d[u+9]&(wireFlagTrm|wireFlagRet) == wireFlagTrm|wireFlagRet
}
