package wire_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

// Non-trivial connection IDs: every byte differs, the top bits are set.
const (
	connA = 0x0123456789abcdef
	connB = 0xfedcba9876543210
)

// payload returns n deterministic non-zero bytes.
func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	return b
}

func hdr(t wire.Type, f wire.Flags) wire.Header {
	return wire.Header{Type: t, Flags: f, EV: 0xbeef, ReplyPort: 0xc0de, DstConn: connA, SrcConn: connB}
}

func dataPacket(n int) wire.Packet {
	return wire.Packet{
		Header: hdr(wire.TypeData, wire.FlagRetx|wire.FlagLast|wire.FlagAckReq),
		Data: wire.Data{
			PSN:         0xfffffffe,
			AckFloor:    0xffffff00,
			MsgID:       0x80000001,
			MsgLen:      0x00f0_0000 + uint32(n),
			Offset:      0x00f0_0000,
			PayloadLen:  uint16(n),
			StreamStart: 0x1234_5678_9abc_def0,
			TxTime:      -0x0102_0304_0506_0708, // sign must survive the round trip
		},
		Payload: payload(n),
	}
}

func ackPacket(words, clean int) wire.Packet {
	p := wire.Packet{
		Header: hdr(wire.TypeAck, wire.FlagCE),
		Ack: wire.Ack{
			CumPSN:     0xffffffc0,
			SackBase:   0xffffffc1,
			AckedPSN:   0x0000002a,
			EchoEV:     0xa5a5,
			SackWords:  uint8(words),
			EchoTxTime: 0x7edc_ba98_7654_3210,
			HoldTime:   0x8765_4321,
			CECount:    0x1234,
			PktCount:   0xfedc,
			Delivered:  0xf00d_cafe_dead_beef,
			Window:     0xfffffff0,
		},
	}
	for i := range words {
		p.Ack.Sack[i] = 0x8000_0000_0000_0001 ^ uint64(i+1)*0x0101_0101_0101_0101
	}
	if clean > 0 {
		p.Flags |= wire.FlagCleanEV
		p.Ack.NumClean = uint8(clean)
		for i := range clean {
			p.Ack.CleanEVs[i] = uint16(0xff00 + i)
		}
	}
	return p
}

func nackPacket() wire.Packet {
	return wire.Packet{
		Header: hdr(wire.TypeNack, wire.FlagCE),
		Nack: wire.Nack{
			PSN:        0xffffffff,
			CumPSN:     0xfffffff0,
			EchoEV:     0x7fff,
			HoldTime:   0xdeadbeef,
			EchoTxTime: -1,
		},
	}
}

// samples returns one valid packet of every type (and of the notable variants).
func samples() map[string]wire.Packet {
	m := map[string]wire.Packet{
		"data":         dataPacket(4096),
		"data/1B":      dataPacket(1),
		"data/max":     dataPacket(wire.MaxPayload),
		"nack":         nackPacket(),
		"probe":        {Header: hdr(wire.TypeProbe, 0), Probe: 0x0102_0304_0506_0708},
		"close":        {Header: hdr(wire.TypeClose, 0), Reason: 0xcafef00d},
		"close_ack":    {Header: hdr(wire.TypeCloseAck, 0)},
		"reset":        {Header: hdr(wire.TypeReset, 0)},
		"pull":         {Header: hdr(wire.TypePull, 0), Pull: wire.Pull{Granted: 0x0102_0304_0506_0708}},
		"ack/4w/clean": ackPacket(4, wire.MaxCleanEVs),
	}
	// Types that may be sent before the peer's connection ID is known.
	for _, name := range []string{"data", "probe", "close"} {
		p := m[name]
		p.DstConn = 0
		m[name+"/nodst"] = p
	}
	for w := wire.MinSackWords; w <= wire.MaxSackWords; w++ {
		for _, c := range []int{0, 1, 17, wire.MaxCleanEVs} {
			m[fmt.Sprintf("ack/%dw/%dclean", w, c)] = ackPacket(w, c)
		}
	}
	return m
}

// diff returns the names of the fields in which structs a and b differ.
func diff(a, b any) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := range va.NumField() {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, fmt.Sprintf("%s: %v != %v", va.Type().Field(i).Name, va.Field(i), vb.Field(i)))
		}
	}
	return out
}

// packetDiff compares the common header and the part of the packet its Type uses. For
// an ACK only the SACK words and clean EVs in use are compared.
func packetDiff(want, got *wire.Packet) []string {
	d := diff(want.Header, got.Header)
	switch want.Type {
	case wire.TypeData:
		d = append(d, diff(want.Data, got.Data)...)
		if !bytes.Equal(want.Payload, got.Payload) {
			d = append(d, fmt.Sprintf("Payload: %d bytes != %d bytes", len(want.Payload), len(got.Payload)))
		}
	case wire.TypeAck:
		wa, ga := want.Ack, got.Ack
		n := int(wa.NumClean)
		if !slices.Equal(wa.CleanEVs[:n], ga.CleanEVs[:n]) {
			d = append(d, fmt.Sprintf("CleanEVs: %v != %v", wa.CleanEVs[:n], ga.CleanEVs[:n]))
		}
		for i := int(wa.SackWords); i < wire.MaxSackWords; i++ {
			if ga.Sack[i] != 0 {
				d = append(d, fmt.Sprintf("Sack[%d] = %#x beyond SackWords", i, ga.Sack[i]))
			}
		}
		wa.CleanEVs, ga.CleanEVs = [wire.MaxCleanEVs]uint16{}, [wire.MaxCleanEVs]uint16{}
		clear(wa.Sack[min(int(wa.SackWords), wire.MaxSackWords):])
		clear(ga.Sack[min(int(ga.SackWords), wire.MaxSackWords):])
		d = append(d, diff(wa, ga)...)
	case wire.TypeNack:
		d = append(d, diff(want.Nack, got.Nack)...)
	case wire.TypeProbe:
		if want.Probe != got.Probe {
			d = append(d, fmt.Sprintf("Probe: %#x != %#x", want.Probe, got.Probe))
		}
	case wire.TypeClose:
		if want.Reason != got.Reason {
			d = append(d, fmt.Sprintf("Reason: %#x != %#x", want.Reason, got.Reason))
		}
	case wire.TypePull:
		d = append(d, diff(want.Pull, got.Pull)...)
	}
	return d
}

// encode encodes p into a buffer of exactly EncodedLen bytes.
func encode(t testing.TB, p *wire.Packet) []byte {
	t.Helper()
	b := make([]byte, p.EncodedLen())
	n, err := p.Encode(b)
	if err != nil {
		t.Fatalf("Encode(%v): %v", p.Type, err)
	}
	if n != len(b) {
		t.Fatalf("Encode(%v) wrote %d bytes, EncodedLen = %d", p.Type, n, len(b))
	}
	return b
}

// TestRoundTrip checks Decode(Encode(p)) == p for every packet type and variant.
func TestRoundTrip(t *testing.T) {
	for name, p := range samples() {
		t.Run(name, func(t *testing.T) {
			// Encode into an oversized buffer full of garbage: only the first n bytes count.
			buf := bytes.Repeat([]byte{0xff}, p.EncodedLen()+100)
			n, err := p.Encode(buf)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if n != p.EncodedLen() {
				t.Fatalf("Encode wrote %d bytes, EncodedLen = %d", n, p.EncodedLen())
			}
			if want := wantLen(&p); n != want {
				t.Fatalf("Encode wrote %d bytes, want %d", n, want)
			}
			if !bytes.Equal(buf[:n], encode(t, &p)) {
				t.Fatal("encoding depends on the buffer's previous contents")
			}
			if buf[0]>>4 != wire.Version || wire.Type(buf[0]&0xf) != p.Type {
				t.Fatalf("first byte %#x: want version %d type %d", buf[0], wire.Version, p.Type)
			}
			var q wire.Packet
			if err := q.Decode(buf[:n]); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if d := packetDiff(&p, &q); d != nil {
				t.Fatalf("round trip differs:\n%v", d)
			}
			if q.Trimmed() {
				t.Fatal("an untouched packet reports Trimmed")
			}
			if p.Type == wire.TypeData && len(q.Payload) > 0 && &q.Payload[0] != &buf[wire.DataHdrLen] {
				t.Fatal("Payload does not alias the decoded buffer")
			}
		})
	}
}

// wantLen is the encoded length computed from the documented layout.
func wantLen(p *wire.Packet) int {
	switch p.Type {
	case wire.TypeData:
		return 64 + len(p.Payload)
	case wire.TypeAck:
		return 68 + 8*int(p.Ack.SackWords) + 2*int(p.Ack.NumClean)
	case wire.TypeNack:
		return 48
	case wire.TypeProbe:
		return 32
	case wire.TypeClose:
		return 28
	case wire.TypePull:
		return 32
	}
	return 24
}

// TestDecodeReusedPacket decodes different types into one Packet: no stale state leaks
// into the part the new type uses.
func TestDecodeReusedPacket(t *testing.T) {
	var q wire.Packet
	a4 := ackPacket(4, 3)
	a1 := ackPacket(1, 0)
	d := dataPacket(100)
	for _, p := range []wire.Packet{d, a4, a1, nackPacket(), d} {
		if err := q.Decode(encode(t, &p)); err != nil {
			t.Fatalf("Decode %v: %v", p.Type, err)
		}
		if diff := packetDiff(&p, &q); diff != nil {
			t.Fatalf("%v decoded into a reused Packet differs:\n%v", p.Type, diff)
		}
		if p.Type != wire.TypeData && q.Payload != nil {
			t.Fatalf("%v: Payload left from a previous DATA", p.Type)
		}
	}
}

// TestFixedLayout pins a few field offsets, so that the layout documented in docs/wire.md
// cannot drift silently.
func TestFixedLayout(t *testing.T) {
	p := dataPacket(4)
	b := encode(t, &p)
	want := []byte{
		0x11, 0x07, 0xbe, 0xef, 0xc0, 0xde, 0, 0, // ver|type, flags, EV, ReplyPort, reserved
		0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, // DstConn
		0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10, // SrcConn
		0xff, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xff, 0x00, // PSN, AckFloor
		0x80, 0x00, 0x00, 0x01, 0x00, 0xf0, 0x00, 0x04, // MsgID, MsgLen
		0x00, 0xf0, 0x00, 0x00, 0x00, 0x04, 0, 0, // Offset, PayloadLen, reserved
		0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, // StreamStart
		0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0xf8, 0xf8, // TxTime (two's complement)
		1, 8, 15, 22, // payload
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("DATA encoding\n got % x\nwant % x", b, want)
	}

	a := ackPacket(1, 2)
	b = encode(t, &a)
	want = []byte{
		0x12, 0x30, 0xbe, 0xef, 0xc0, 0xde, 0, 0,
		0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
		0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10,
		0xff, 0xff, 0xff, 0xc0, 0xff, 0xff, 0xff, 0xc1, // CumPSN, SackBase
		0x00, 0x00, 0x00, 0x2a, 0xa5, 0xa5, 1, 2, // AckedPSN, EchoEV, SackWords, NumClean
		0x7e, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10, // EchoTxTime
		0x87, 0x65, 0x43, 0x21, 0x12, 0x34, 0xfe, 0xdc, // HoldTime, CECount, PktCount
		0xf0, 0x0d, 0xca, 0xfe, 0xde, 0xad, 0xbe, 0xef, // Delivered
		0xff, 0xff, 0xff, 0xf0, // Window
		0x81, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x00, // Sack[0], big-endian
		0xff, 0x00, 0xff, 0x01, // CleanEVs
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("ACK encoding\n got % x\nwant % x", b, want)
	}

	conns := []byte{
		0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
		0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10,
	}
	common := func(typeFlags ...byte) []byte {
		return append(append(typeFlags, 0xbe, 0xef, 0xc0, 0xde, 0, 0), conns...)
	}
	sm := samples()
	for _, tt := range []struct {
		p    wire.Packet
		want []byte
	}{
		{nackPacket(), append(common(0x13, 0x10),
			0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf0, // PSN, CumPSN
			0x7f, 0xff, 0, 0, 0xde, 0xad, 0xbe, 0xef, // EchoEV, reserved, HoldTime
			0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)}, // EchoTxTime
		{sm["probe"], append(common(0x14, 0), 1, 2, 3, 4, 5, 6, 7, 8)},
		{sm["close"], append(common(0x15, 0), 0xca, 0xfe, 0xf0, 0x0d)},
		{sm["close_ack"], common(0x16, 0)},
		{sm["reset"], common(0x17, 0)},
		{sm["pull"], append(common(0x18, 0), 1, 2, 3, 4, 5, 6, 7, 8)},
	} {
		if b := encode(t, &tt.p); !bytes.Equal(b, tt.want) {
			t.Fatalf("%v encoding\n got % x\nwant % x", tt.p.Type, b, tt.want)
		}
	}
}

// TestReservedIgnored checks that reserved bytes are written as zero and ignored on decode.
func TestReservedIgnored(t *testing.T) {
	reserved := map[wire.Type][]int{
		wire.TypeData: {6, 7, 46, 47},
		wire.TypeNack: {6, 7, 34, 35},
		wire.TypeAck:  {6, 7},
	}
	for _, p := range []wire.Packet{dataPacket(10), nackPacket(), ackPacket(2, 1)} {
		b := encode(t, &p)
		for _, i := range reserved[p.Type] {
			if b[i] != 0 {
				t.Fatalf("%v: reserved byte %d = %#x, want 0", p.Type, i, b[i])
			}
			b[i] = 0x5a
		}
		var q wire.Packet
		if err := q.Decode(b); err != nil {
			t.Fatalf("%v with reserved bytes set: %v", p.Type, err)
		}
		if d := packetDiff(&p, &q); d != nil {
			t.Fatalf("%v with reserved bytes set decodes differently:\n%v", p.Type, d)
		}
	}
}

// mutate returns a copy of the encoding of p changed by f.
func mutate(p wire.Packet, f func(b []byte) []byte) []byte {
	b := make([]byte, p.EncodedLen())
	if _, err := p.Encode(b); err != nil {
		panic(err)
	}
	return f(b)
}

func set(i int, v ...byte) func([]byte) []byte {
	return func(b []byte) []byte { copy(b[i:], v); return b }
}

func same(b []byte) []byte { return b }

func zero(from, to int) func([]byte) []byte {
	return func(b []byte) []byte { clear(b[from:to]); return b }
}

// TestDecodeErrors checks that each crafted input yields the expected error value.
func TestDecodeErrors(t *testing.T) {
	data, ack := dataPacket(100), ackPacket(2, 3)
	ack0 := ackPacket(2, 0)
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, wire.ErrShort},
		{"23 bytes", make([]byte, 23), wire.ErrShort},
		{"ack missing sack word", mutate(ack0, set(38, 3)), wire.ErrShort},
		{"ack missing clean EV", mutate(ack, set(39, 4)), wire.ErrShort},
		{"version 0", mutate(data, set(0, 0x01)), wire.ErrVersion},
		{"version 2", mutate(data, set(0, 0x21)), wire.ErrVersion},
		{"version 15", mutate(ack, set(0, 0xf2)), wire.ErrVersion},
		{"type 0", mutate(data, set(0, 0x10)), wire.ErrType},
		{"type 9", mutate(data, set(0, 0x19)), wire.ErrType},
		{"type 15", mutate(data, set(0, 0x1f)), wire.ErrType},
		{"INT flag on nack", mutate(nackPacket(), set(1, 0x80)), wire.ErrFlags},
		{"INT flag on probe", mutate(samples()["probe/nodst"], set(1, 0x80)), wire.ErrFlags},
		{"INT flag on data without block", mutate(data, set(1, 0x80)), wire.ErrINT},
		{"INT flag on ack without block", mutate(ack, set(1, 0xa0)), wire.ErrINT},
		{"data SrcConn 0", mutate(data, zero(16, 24)), wire.ErrConnID},
		{"probe SrcConn 0", mutate(samples()["probe/nodst"], zero(16, 24)), wire.ErrConnID},
		{"ack DstConn 0", mutate(ack, zero(8, 16)), wire.ErrConnID},
		{"nack DstConn 0", mutate(nackPacket(), zero(8, 16)), wire.ErrConnID},
		{"close_ack DstConn 0", mutate(samples()["close_ack"], zero(8, 16)), wire.ErrConnID},
		{"reset DstConn 0", mutate(samples()["reset"], zero(8, 16)), wire.ErrConnID},
		{"pull DstConn 0", mutate(samples()["pull"], zero(8, 16)), wire.ErrConnID},
		{"pull 31 bytes", mutate(samples()["pull"], same)[:31], wire.ErrShort},
		{"pull Granted 0", mutate(samples()["pull"], zero(24, 32)), wire.ErrLength},
		{"data MsgLen 0", mutate(data, zero(36, 40)), wire.ErrLength},
		{"data PayloadLen 0", mutate(data, zero(44, 46)), wire.ErrLength},
		{"data Offset+PayloadLen > MsgLen", mutate(data, set(40, 0x00, 0xf0, 0x00, 0x01)), wire.ErrLength},
		{"data Offset overflows 32 bits", mutate(data, set(40, 0xff, 0xff, 0xff, 0xff)), wire.ErrLength},
		{"data payload longer than PayloadLen", mutate(data, set(44, 0, 99)), wire.ErrLength},
		{"ack trailing byte", append(mutate(ack, same), 0), wire.ErrLength},
		{"ack 0 SACK words", mutate(ack, set(38, 0)), wire.ErrSackWidth},
		{"ack 5 SACK words", mutate(ack, set(38, 5)), wire.ErrSackWidth},
		{"ack 255 SACK words", mutate(ack, set(38, 255)), wire.ErrSackWidth},
		{"clean EVs without flag", mutate(ack, set(1, 0)), wire.ErrCleanEVs},
		{"flag without clean EVs", mutate(ack0, set(1, byte(wire.FlagCleanEV))), wire.ErrCleanEVs},
		{"65 clean EVs", mutate(ack, set(39, wire.MaxCleanEVs+1)), wire.ErrCleanEVs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p wire.Packet
			err := p.Decode(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decode = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestEncodeErrors checks that each inconsistent packet yields the expected error value.
func TestEncodeErrors(t *testing.T) {
	with := func(p wire.Packet, f func(*wire.Packet)) wire.Packet { f(&p); return p }
	data, ack := dataPacket(100), ackPacket(2, 3)
	tests := []struct {
		name string
		p    wire.Packet
		want error
	}{
		{"type 0", with(data, func(p *wire.Packet) { p.Type = 0 }), wire.ErrType},
		{"type 9", with(data, func(p *wire.Packet) { p.Type = 9 }), wire.ErrType},
		{"INT flag on nack", with(nackPacket(), func(p *wire.Packet) { p.Flags |= wire.FlagINT }), wire.ErrFlags},
		{"data SrcConn 0", with(data, func(p *wire.Packet) { p.SrcConn = 0 }), wire.ErrConnID},
		{"close SrcConn 0", with(samples()["close"], func(p *wire.Packet) { p.SrcConn = 0 }), wire.ErrConnID},
		{"ack DstConn 0", with(ack, func(p *wire.Packet) { p.DstConn = 0 }), wire.ErrConnID},
		{"nack DstConn 0", with(nackPacket(), func(p *wire.Packet) { p.DstConn = 0 }), wire.ErrConnID},
		{"close_ack DstConn 0", with(samples()["close_ack"], func(p *wire.Packet) { p.DstConn = 0 }), wire.ErrConnID},
		{"reset DstConn 0", with(samples()["reset"], func(p *wire.Packet) { p.DstConn = 0 }), wire.ErrConnID},
		{"pull DstConn 0", with(samples()["pull"], func(p *wire.Packet) { p.DstConn = 0 }), wire.ErrConnID},
		{"pull Granted 0", with(samples()["pull"], func(p *wire.Packet) { p.Pull.Granted = 0 }), wire.ErrLength},
		{"PayloadLen != len(Payload)", with(data, func(p *wire.Packet) { p.Data.PayloadLen-- }), wire.ErrLength},
		{"empty payload", with(data, func(p *wire.Packet) { p.Payload, p.Data.PayloadLen = nil, 0 }), wire.ErrLength},
		{"MsgLen 0", with(data, func(p *wire.Packet) { p.Data.MsgLen = 0 }), wire.ErrLength},
		{"Offset+PayloadLen > MsgLen", with(data, func(p *wire.Packet) { p.Data.Offset++ }), wire.ErrLength},
		{"Offset overflows 32 bits", with(data, func(p *wire.Packet) {
			p.Data.MsgLen, p.Data.Offset = 0xffffffff, 0xffffffff-50
		}), wire.ErrLength},
		{"0 SACK words", with(ack, func(p *wire.Packet) { p.Ack.SackWords = 0 }), wire.ErrSackWidth},
		{"5 SACK words", with(ack, func(p *wire.Packet) { p.Ack.SackWords = 5 }), wire.ErrSackWidth},
		{"clean EVs without flag", with(ack, func(p *wire.Packet) { p.Flags &^= wire.FlagCleanEV }), wire.ErrCleanEVs},
		{"flag without clean EVs", with(ack, func(p *wire.Packet) { p.Ack.NumClean = 0 }), wire.ErrCleanEVs},
		{"65 clean EVs", with(ack, func(p *wire.Packet) { p.Ack.NumClean = wire.MaxCleanEVs + 1 }), wire.ErrCleanEVs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf := make([]byte, 1<<17) // never the reason for failing
			n, err := tt.p.Encode(buf)
			if !errors.Is(err, tt.want) || n != 0 {
				t.Fatalf("Encode = %d, %v; want 0, %v", n, err, tt.want)
			}
		})
	}
	for name, p := range samples() {
		t.Run("short buffer/"+name, func(t *testing.T) {
			buf := make([]byte, p.EncodedLen()-1)
			n, err := p.Encode(buf)
			if !errors.Is(err, wire.ErrBuffer) || n != 0 {
				t.Fatalf("Encode into %d bytes = %d, %v; want 0, ErrBuffer", len(buf), n, err)
			}
		})
	}
}

// TestErrorValues checks the error codes are distinct, in range and named.
func TestErrorValues(t *testing.T) {
	all := []*wire.Error{wire.ErrShort, wire.ErrVersion, wire.ErrType, wire.ErrFlags, wire.ErrConnID,
		wire.ErrLength, wire.ErrSackWidth, wire.ErrCleanEVs, wire.ErrBuffer, wire.ErrINT, wire.ErrBundle}
	if len(all) != wire.NumErrors {
		t.Fatalf("%d error values, NumErrors = %d", len(all), wire.NumErrors)
	}
	seen := make(map[int]bool)
	for _, e := range all {
		if e.Code < 0 || e.Code >= wire.NumErrors || seen[e.Code] {
			t.Errorf("%v: code %d duplicate or outside 0..%d", e, e.Code, wire.NumErrors-1)
		}
		seen[e.Code] = true
		if len(e.Error()) <= len("wire: ") {
			t.Errorf("code %d has no message", e.Code)
		}
	}
	if errors.Is(wire.ErrShort, wire.ErrLength) {
		t.Error("distinct error values compare equal")
	}
}

// TestTruncation cuts a valid packet of every type at every length below its header:
// always ErrShort. Cutting only a DATA payload decodes as a trimmed packet.
func TestTruncation(t *testing.T) {
	for name, p := range samples() {
		t.Run(name, func(t *testing.T) {
			b := encode(t, &p)
			hdrLen := len(b)
			if p.Type == wire.TypeData {
				hdrLen = wire.DataHdrLen
			}
			var q wire.Packet
			for n := range hdrLen {
				if err := q.Decode(b[:n]); !errors.Is(err, wire.ErrShort) {
					t.Fatalf("Decode of first %d/%d bytes = %v, want ErrShort", n, len(b), err)
				}
			}
			if p.Type != wire.TypeData {
				return
			}
			for n := hdrLen; n < len(b); n++ {
				if err := q.Decode(b[:n]); err != nil {
					t.Fatalf("DATA with %d of %d payload bytes: %v", n-hdrLen, len(p.Payload), err)
				}
				if !q.Trimmed() {
					t.Fatalf("DATA with %d of %d payload bytes: Trimmed() = false", n-hdrLen, len(p.Payload))
				}
				if q.Data != p.Data || !bytes.Equal(q.Payload, p.Payload[:n-hdrLen]) {
					t.Fatalf("DATA with %d payload bytes decoded wrong: %+v", n-hdrLen, q.Data)
				}
			}
		})
	}
}

// TestTrimmed covers the other ways Trimmed reports true or false.
func TestTrimmed(t *testing.T) {
	p := dataPacket(64)
	p.Flags |= wire.FlagTrimmed
	var q wire.Packet
	if err := q.Decode(encode(t, &p)); err != nil {
		t.Fatal(err)
	}
	if !q.Trimmed() || len(q.Payload) != 64 {
		t.Fatalf("DATA with FlagTrimmed and its whole payload: Trimmed() = %v", q.Trimmed())
	}
	a := ackPacket(1, 0)
	a.Flags |= wire.FlagTrimmed
	if err := q.Decode(encode(t, &a)); err != nil {
		t.Fatal(err)
	}
	if q.Trimmed() {
		t.Fatal("an ACK with bit 0x08 set reports Trimmed")
	}
}

// TestNoAllocs checks that encoding and decoding DATA and ACK never allocate.
func TestNoAllocs(t *testing.T) {
	data, ack := dataPacket(4096), ackPacket(4, wire.MaxCleanEVs)
	buf := make([]byte, 8192)
	var q wire.Packet
	n, _ := data.Encode(buf)
	dataBytes := append([]byte(nil), buf[:n]...)
	n, _ = ack.Encode(buf)
	ackBytes := append([]byte(nil), buf[:n]...)
	for _, tt := range []struct {
		name string
		f    func()
	}{
		{"EncodeData", func() { _, _ = data.Encode(buf) }},
		{"DecodeData", func() { _ = q.Decode(dataBytes) }},
		{"EncodeAck", func() { _, _ = ack.Encode(buf) }},
		{"DecodeAck", func() { _ = q.Decode(ackBytes) }},
		{"DecodeError", func() { _ = q.Decode(dataBytes[:10]) }},
	} {
		if a := testing.AllocsPerRun(100, tt.f); a != 0 {
			t.Errorf("%s: %v allocations per run, want 0", tt.name, a)
		}
	}
}

// TestSeq checks the serial-number comparisons, in particular across the 2^32 wrap.
func TestSeq(t *testing.T) {
	tests := []struct {
		a, b      uint32
		less, leq bool
		diff      int32
	}{
		{0, 0, false, true, 0},
		{1, 2, true, true, -1},
		{2, 1, false, false, 1},
		{0xffffffff, 0, true, true, -1},
		{0, 0xffffffff, false, false, 1},
		{0xffffff00, 0x10, true, true, -0x110},
		{0x10, 0xffffff00, false, false, 0x110},
		{0xffffffff, 0xffffffff, false, true, 0},
		{0x7fffffff, 0, false, false, 0x7fffffff},
		{0, 0x7fffffff, true, true, -0x7fffffff},
		{0x80000000, 0x7fffffff, false, false, 1},
		// Exactly 2^31 apart is ambiguous: each is "before" the other.
		{0x80000000, 0, true, true, -0x80000000},
		{0, 0x80000000, true, true, -0x80000000},
	}
	for _, tt := range tests {
		if got := wire.SeqLess(tt.a, tt.b); got != tt.less {
			t.Errorf("SeqLess(%#x, %#x) = %v", tt.a, tt.b, got)
		}
		if got := wire.SeqLEQ(tt.a, tt.b); got != tt.leq {
			t.Errorf("SeqLEQ(%#x, %#x) = %v", tt.a, tt.b, got)
		}
		if got := wire.SeqDiff(tt.a, tt.b); got != tt.diff {
			t.Errorf("SeqDiff(%#x, %#x) = %d, want %d", tt.a, tt.b, got, tt.diff)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		a, k := r.Uint32(), r.Uint32N(1<<31-1)+1 // 1 <= k < 2^31
		b := a + k
		if !wire.SeqLess(a, b) || wire.SeqLess(b, a) || !wire.SeqLEQ(a, b) || wire.SeqLEQ(b, a) {
			t.Fatalf("order of %#x and %#x = %#x+%d wrong", a, b, a, k)
		}
		if wire.SeqDiff(b, a) != int32(k) || wire.SeqDiff(a, b) != -int32(k) {
			t.Fatalf("SeqDiff(%#x, %#x) = %d, want %d", b, a, wire.SeqDiff(b, a), k)
		}
	}
}

// FuzzDecode decodes arbitrary bytes: Decode must not panic, must return only this
// package's error values, and whatever decodes must re-encode to the same Packet.
func FuzzDecode(f *testing.F) {
	for _, p := range samples() {
		if p.Type == wire.TypeData && len(p.Payload) > 4096 {
			continue // keep seeds small
		}
		f.Add(mutate(p, same))
	}
	f.Add(mutate(intData(100, 2, 5), same))
	f.Add(mutate(intAck(3), same))
	f.Fuzz(func(t *testing.T, b []byte) {
		var p wire.Packet
		err := p.Decode(b)
		if err != nil {
			var e *wire.Error
			if !errors.As(err, &e) {
				t.Fatalf("Decode returned a foreign error %T: %v", err, err)
			}
			return
		}
		if p.Type == wire.TypeData {
			if len(p.Payload) > len(b)-wire.DataHdrLen || int(p.Data.PayloadLen) < len(p.Payload) {
				t.Fatalf("payload of %d bytes from %d-byte packet, PayloadLen %d",
					len(p.Payload), len(b), p.Data.PayloadLen)
			}
			if len(p.Payload) < int(p.Data.PayloadLen) {
				if !p.Trimmed() {
					t.Fatal("short payload not reported as trimmed")
				}
				if len(p.Payload) == 0 {
					return // a header without payload cannot be encoded
				}
				p.Data.PayloadLen = uint16(len(p.Payload)) // what a re-encoding would declare
			}
		}
		if n := p.EncodedLen(); n > len(b) {
			t.Fatalf("EncodedLen %d exceeds the %d bytes decoded", n, len(b))
		}
		buf := make([]byte, wire.DataHdrLen+wire.MaxPayload)
		n, err := p.Encode(buf)
		if err != nil {
			t.Fatalf("decoded %+v does not re-encode: %v", p.Header, err)
		}
		if n != p.EncodedLen() {
			t.Fatalf("Encode wrote %d bytes, EncodedLen = %d", n, p.EncodedLen())
		}
		var q wire.Packet
		if err := q.Decode(buf[:n]); err != nil {
			t.Fatalf("re-encoded %v does not decode: %v", p.Type, err)
		}
		if d := packetDiff(&p, &q); d != nil {
			t.Fatalf("re-encoded %v decodes differently:\n%v", p.Type, d)
		}
		if p.Type == wire.TypeAck && !reflect.DeepEqual(p.Ack, q.Ack) {
			t.Fatalf("ACK differs after re-encoding: %+v != %+v", p.Ack, q.Ack)
		}
	})
}

var (
	sinkN   int
	sinkErr error
)

// BenchmarkEncodeData encodes a DATA packet with a 4096-byte payload.
func BenchmarkEncodeData(b *testing.B) {
	p := dataPacket(4096)
	buf := make([]byte, p.EncodedLen())
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		sinkN, sinkErr = p.Encode(buf)
	}
}

// BenchmarkDecodeData decodes a DATA packet with a 4096-byte payload.
func BenchmarkDecodeData(b *testing.B) {
	p := dataPacket(4096)
	enc := encode(b, &p)
	var q wire.Packet
	// No SetBytes: Decode parses the header and aliases the payload without touching it.
	b.ReportAllocs()
	for b.Loop() {
		sinkErr = q.Decode(enc)
	}
}

// BenchmarkEncodeAck encodes an ACK with a 256-bit SACK bitmap.
func BenchmarkEncodeAck(b *testing.B) {
	p := ackPacket(wire.MaxSackWords, 0)
	buf := make([]byte, wire.MaxAckLen)
	b.SetBytes(int64(p.EncodedLen()))
	b.ReportAllocs()
	for b.Loop() {
		sinkN, sinkErr = p.Encode(buf)
	}
}

// BenchmarkDecodeAck decodes an ACK with a 256-bit SACK bitmap.
func BenchmarkDecodeAck(b *testing.B) {
	p := ackPacket(wire.MaxSackWords, 0)
	enc := encode(b, &p)
	var q wire.Packet
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		sinkErr = q.Decode(enc)
	}
}

// TestSealedFlag: FlagSealed is a known flag on every type; Encode writes it and Decode
// reports it (the trailer itself is transport/seal's, stripped before Decode).
func TestSealedFlag(t *testing.T) {
	for _, typ := range []wire.Type{wire.TypeData, wire.TypeAck, wire.TypeNack, wire.TypeProbe,
		wire.TypeClose, wire.TypeCloseAck, wire.TypeReset, wire.TypePull} {
		p := wire.Packet{Header: hdr(typ, wire.FlagSealed)}
		if typ == wire.TypeData {
			p.Data = wire.Data{MsgLen: 10, PayloadLen: 10}
			p.Payload = payload(10)
		}
		if typ == wire.TypeAck {
			p.Ack.SackWords = 1
		}
		if typ == wire.TypePull {
			p.Pull.Granted = 1
		}
		buf := make([]byte, 300)
		n, err := p.Encode(buf)
		if err != nil {
			t.Fatalf("%v: encode: %v", typ, err)
		}
		if buf[1] != byte(wire.FlagSealed) || wire.FlagSealed != 0x40 {
			t.Fatalf("%v: flag byte %#x", typ, buf[1])
		}
		var q wire.Packet
		if err := q.Decode(buf[:n]); err != nil || q.Flags != wire.FlagSealed {
			t.Fatalf("%v: decode: %v, flags %#x", typ, err, q.Flags)
		}
	}
}
