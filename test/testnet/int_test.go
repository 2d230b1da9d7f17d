package testnet

import (
	"testing"

	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/wire"
)

// intSender sends n DATA packets with a 2-slot INT block at once; intSink decodes what
// arrives.
type intSender struct {
	to   [1]byte
	left int
	psn  uint32
}

func (s *intSender) HandlePacket(int64, []byte, transport.RxMeta) {}
func (s *intSender) HandleTimeout(int64)                          {}
func (s *intSender) NextTimeout() (int64, bool)                   { return 0, false }
func (s *intSender) PollTransmit(now int64, buf []byte) (transport.Transmit, bool) {
	if s.left == 0 {
		return transport.Transmit{}, false
	}
	s.left--
	p := wire.Packet{Header: wire.Header{Type: wire.TypeData, Flags: wire.FlagINT, SrcConn: 1},
		Data: wire.Data{PSN: s.psn, MsgLen: 1000, PayloadLen: 1000}, Payload: make([]byte, 1000), INT: wire.INT{Cap: 2}}
	s.psn++
	n, err := p.Encode(buf)
	if err != nil {
		panic(err)
	}
	return transport.Transmit{N: n, To: addrB, ECN: transport.ECT0, Type: wire.TypeData}, true
}

type intSink struct {
	got []wire.INT
	n   []int
}

func (s *intSink) HandlePacket(now int64, b []byte, m transport.RxMeta) {
	var p wire.Packet
	if err := p.Decode(b); err != nil {
		panic(err)
	}
	s.got, s.n = append(s.got, p.INT), append(s.n, len(b))
}
func (s *intSink) HandleTimeout(int64)        {}
func (s *intSink) NextTimeout() (int64, bool) { return 0, false }
func (s *intSink) PollTransmit(int64, []byte) (transport.Transmit, bool) {
	return transport.Transmit{}, false
}

// TestINTStamps: with Config.INT every port with a rate writes its record into DATA
// packets with an INT block: the service start, the bytes serialised before, the data
// queue behind and the rate; a trimmed packet keeps its block.
func TestINTStamps(t *testing.T) {
	n := New(Config{Delay: 1000, INT: true}, 1)
	a, b := &intSender{left: 4}, &intSink{}
	const size = 64 + 4 + 32 + 1000
	n.Attach(addrA, a, HostConfig{})
	n.Attach(addrB, b, HostConfig{Port: PortConfig{Rate: 10e9, BufferBytes: 2 * size, ControlBytes: 10 * size, Trim: true}})
	n.Wake(addrA)
	n.RunUntil(1e9, nil)
	if len(b.got) != 4 {
		t.Fatalf("%d packets arrived", len(b.got))
	}
	// Packet 0 starts at once (nothing queued behind it yet), 1 and 2 queue, 3 is
	// trimmed and overtakes them; serialising 1100 bytes at 10 Gbit/s takes 880 ns. (The
	// propagation delay comes after the port.)
	ser := int64(size * 8 / 10)
	hdr := wire.DataHdrLen + wire.INTLen(2)
	want := []wire.INTHop{
		{TS: 0, TxBytes: 0, QLen: 0, Rate: 10_000},
		{TS: uint32(ser), TxBytes: size, QLen: 2 * size, Rate: 10_000}, // the trimmed header
		{TS: uint32(ser + int64(hdr)*8/10), TxBytes: size + uint32(hdr), QLen: size, Rate: 10_000},
	}
	for i, w := range want {
		if g := b.got[i]; g.N != 1 || g.Cap != 2 || g.Hops[0] != w {
			t.Errorf("packet %d: INT %d/%d %+v, want %+v", i, g.N, g.Cap, g.Hops[0], w)
		}
	}
	if b.n[1] != wire.DataHdrLen+wire.INTLen(2) {
		t.Errorf("trimmed packet of %d bytes: the INT block must survive", b.n[1])
	}
	// Without INT nothing is stamped.
	n = New(Config{Delay: 1000}, 1)
	a, b = &intSender{left: 1}, &intSink{}
	n.Attach(addrA, a, HostConfig{})
	n.Attach(addrB, b, HostConfig{Port: PortConfig{Rate: 10e9}})
	n.Wake(addrA)
	n.RunUntil(1e9, nil)
	if len(b.got) != 1 || b.got[0].N != 0 {
		t.Fatalf("stamped without Config.INT: %+v", b.got)
	}
}
