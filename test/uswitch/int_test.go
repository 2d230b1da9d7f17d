package uswitch_test

import (
	"encoding/binary"
	"testing"

	"github.com/smartt-transport/smartt/test/uswitch"
	"github.com/smartt-transport/smartt/transport/wire"
)

// intFrame builds an Ethernet/IPv4/UDP frame carrying a DATA packet with an INT block of
// cap slots and payload bytes, its UDP checksum complete (offload already finished).
func intFrame(t *testing.T, payload, cap int) *uswitch.Frame {
	t.Helper()
	p := wire.Packet{Header: wire.Header{Type: wire.TypeData, Flags: wire.FlagINT, EV: 1, SrcConn: 5},
		Data: wire.Data{PSN: 9, MsgLen: uint32(payload), PayloadLen: uint16(payload)}, Payload: make([]byte, payload),
		INT: wire.INT{Cap: uint8(cap)}}
	for i := range p.Payload {
		p.Payload[i] = byte(i * 7)
	}
	fr := dataFrame(p.EncodedLen()-64, 2)
	u := fr[34:]
	if _, err := p.Encode(u[8:]); err != nil {
		t.Fatal(err)
	}
	// What a sender's stack leaves for offload: the pseudo-header sum, uncomplemented.
	binary.BigEndian.PutUint16(u[6:], fold(pseudo(fr[14:34], len(u))))
	f := uswitch.NewTestFrame(fr, 34, 6)
	if err := f.FinishChecksum(); err != nil {
		t.Fatal(err)
	}
	checkSums(t, f.Data())
	return f
}

// TestStampINTFrame: the userspace switch writes INT records into a DATA frame's INT
// block in order, sets the overflow flag when the slots are full, keeps the UDP checksum
// valid through every stamp, and leaves frames without a block alone; trimming keeps the
// header and the INT block.
func TestStampINTFrame(t *testing.T) {
	f := intFrame(t, 3000, 2)
	for i := range 2 {
		if v := f.StampINT(wire.INTHop{TS: uint32(1000 * i), TxBytes: 0xfffffff0 + uint32(i), QLen: 4160, Rate: 1000}); v != wire.StampDone {
			t.Fatalf("stamp %d: %d", i, v)
		}
		checkSums(t, f.Data())
	}
	if v := f.StampINT(wire.INTHop{QLen: 1}); v != wire.StampOverflow {
		t.Fatalf("third stamp into 2 slots: %d", v)
	}
	checkSums(t, f.Data())
	var p wire.Packet
	if err := p.Decode(f.Data()[42:]); err != nil {
		t.Fatal(err)
	}
	if p.INT.N != 2 || p.INT.Flags != wire.INTOverflow || p.INT.Hops[1].TS != 1000 || p.INT.Hops[1].TxBytes != 0xfffffff1 || len(p.Payload) != 3000 {
		t.Fatalf("decoded INT %+v, %d payload bytes", p.INT, len(p.Payload))
	}
	if !f.Trim(46) || f.Len() != 14+20+8+64+wire.INTLen(2) {
		t.Fatalf("trimmed INT frame: %d bytes", f.Len())
	}
	checkSums(t, f.Data())
	if err := p.Decode(f.Data()[42:]); err != nil || !p.Trimmed() || p.INT.N != 2 {
		t.Fatalf("trimmed INT frame decodes: %v, trimmed %v, %d records", err, p.Trimmed(), p.INT.N)
	}
	plain := uswitch.NewTestFrame(dataFrame(500, 2), 34, 6)
	before := append([]byte(nil), plain.Data()...)
	if v := plain.StampINT(wire.INTHop{QLen: 1}); v != wire.StampNone || string(before) != string(plain.Data()) {
		t.Fatal("stamped a DATA frame without an INT block")
	}
}
