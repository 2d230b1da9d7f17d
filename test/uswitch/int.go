package uswitch

import (
	"encoding/binary"

	"github.com/smartt-transport/smartt/transport/wire"
)

// StampINT writes an INT record into a DATA frame that carries an INT block
// (wire.StampINT: the next free slot, or the overflow flag) and keeps the UDP checksum
// right: a checksum left to offload is completed later over the new bytes, a complete
// one is updated incrementally (RFC 1624), an absent one (0) stays absent. It reports
// what wire.StampINT did; any other frame is left alone (wire.StampNone).
func (f *Frame) StampINT(h wire.INTHop) int {
	if !f.IsData() {
		return wire.StampNone
	}
	_, u, _ := f.udp()
	d := f.Data()
	pl := d[u+8:]
	if len(pl) < wire.DataHdrLen+wire.INTHdrLen {
		return wire.StampNone
	}
	// The block starts at an even offset of the UDP header: its 16-bit words are the
	// checksum's words.
	blk := pl[wire.DataHdrLen:min(len(pl), wire.DataHdrLen+wire.INTLen(wire.MaxINTHops))]
	var old [wire.INTHdrLen + wire.INTHopLen*wire.MaxINTHops]byte
	copy(old[:], blk)
	v := wire.StampINT(pl, h)
	if v == wire.StampNone || f.NeedsChecksum() {
		return v
	}
	c := d[u+6:]
	if cs := binary.BigEndian.Uint16(c); cs != 0 {
		s := uint32(^cs) + uint32(^fold(sum16(old[:len(blk)]))) + uint32(fold(sum16(blk)))
		n := ^fold(s)
		if n == 0 {
			n = 0xffff // UDP sends an all-zero checksum as 0xffff
		}
		binary.BigEndian.PutUint16(c, n)
	}
	return v
}
