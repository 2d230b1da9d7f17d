package wire_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

func intData(n, hops, cap int) wire.Packet {
	p := dataPacket(n)
	p.Flags |= wire.FlagINT
	p.INT = wire.INT{N: uint8(hops), Cap: uint8(cap)}
	for i := range min(hops, wire.MaxINTHops) {
		p.INT.Hops[i] = hop(i)
	}
	return p
}

func intAck(hops int) wire.Packet {
	p := ackPacket(2, 3)
	p.Flags |= wire.FlagINT
	p.INT = wire.INT{N: uint8(hops), Cap: uint8(hops)}
	for i := range hops {
		p.INT.Hops[i] = hop(i)
	}
	return p
}

func hop(i int) wire.INTHop {
	return wire.INTHop{TS: 0xfffffff0 + uint32(i), TxBytes: 0x8000_0000 + uint32(i)*4160, QLen: uint32(i) * 1000, Rate: 800_000}
}

// intDiff reports whether q carries p's INT block.
func intDiff(t *testing.T, p, q *wire.Packet) {
	t.Helper()
	if q.INT.N != p.INT.N || q.INT.Cap != p.INT.Cap || q.INT.Flags != p.INT.Flags {
		t.Fatalf("INT header %d/%d/%#x, want %d/%d/%#x", q.INT.N, q.INT.Cap, q.INT.Flags, p.INT.N, p.INT.Cap, p.INT.Flags)
	}
	for i := range int(p.INT.N) {
		if q.INT.Hops[i] != p.INT.Hops[i] {
			t.Fatalf("hop %d: %+v, want %+v", i, q.INT.Hops[i], p.INT.Hops[i])
		}
	}
}

// TestINTRoundTrip: DATA and ACK with INT blocks of every size decode to what was
// encoded, at the documented lengths, and the payload follows the block.
func TestINTRoundTrip(t *testing.T) {
	for c := 1; c <= wire.MaxINTHops; c++ {
		for n := 0; n <= c; n++ {
			p := intData(100, n, c)
			b := encode(t, &p)
			if len(b) != 64+4+16*c+100 {
				t.Fatalf("DATA with %d slots: %d bytes", c, len(b))
			}
			var q wire.Packet
			if err := q.Decode(b); err != nil {
				t.Fatalf("DATA %d/%d: %v", n, c, err)
			}
			intDiff(t, &p, &q)
			if !bytes.Equal(q.Payload, p.Payload) || &q.Payload[0] != &b[64+4+16*c] || q.Trimmed() {
				t.Fatalf("DATA %d/%d: payload wrong", n, c)
			}
		}
	}
	for n := 0; n <= wire.MaxINTHops; n++ {
		p := intAck(n)
		b := encode(t, &p)
		if len(b) != 68+16+6+4+16*n {
			t.Fatalf("ACK with %d hops: %d bytes", n, len(b))
		}
		var q wire.Packet
		if err := q.Decode(b); err != nil {
			t.Fatalf("ACK %d: %v", n, err)
		}
		intDiff(t, &p, &q)
		if q.Ack.NumClean != 3 || q.Ack.CleanEVs[2] != p.Ack.CleanEVs[2] {
			t.Fatal("clean EVs lost before the INT block")
		}
	}
	full := intAck(wire.MaxINTHops)
	full.Ack.SackWords, full.Ack.NumClean = wire.MaxSackWords, wire.MaxCleanEVs
	if full.EncodedLen() != wire.MaxAckLen {
		t.Fatalf("largest ACK %d bytes, MaxAckLen %d", full.EncodedLen(), wire.MaxAckLen)
	}
	// Without the flag nothing changes: the block is neither written nor read.
	d := dataPacket(100)
	d.INT = wire.INT{N: 1, Cap: 5}
	if b := encode(t, &d); len(b) != 164 {
		t.Fatalf("DATA without FlagINT: %d bytes", len(b))
	}
	var q wire.Packet
	q.INT.N = 3
	if err := q.Decode(encode(t, &d)); err != nil || q.INT.N != 0 {
		t.Fatalf("DATA without FlagINT decodes with %d hops (%v)", q.INT.N, err)
	}
}

// TestINTDecodeErrors: malformed INT blocks (counts out of range, truncated records,
// unknown INT flags) are ErrINT, at and beyond each limit.
func TestINTDecodeErrors(t *testing.T) {
	data, ack := intData(100, 2, 5), intAck(3)
	const ib = wire.DataHdrLen // INT block of a DATA
	ab := 68 + 16 + 6          // INT block of the ACK (2 SACK words, 3 clean EVs)
	for _, tt := range []struct {
		name string
		in   []byte
		want error
	}{
		{"data N > Cap", mutate(data, set(ib, 6)), wire.ErrINT},
		{"data Cap 0", mutate(data, set(ib, 0, 0)), wire.ErrINT},
		{"data Cap 6", mutate(data, set(ib+1, wire.MaxINTHops+1)), wire.ErrINT},
		{"data Cap 255", mutate(data, set(ib+1, 255)), wire.ErrINT},
		{"data unknown INT flag", mutate(data, set(ib+2, 2)), wire.ErrINT},
		{"data block cut in the header", mutate(data, func(b []byte) []byte { return b[:ib+3] }), wire.ErrINT},
		{"data block cut in a record", mutate(data, func(b []byte) []byte { return b[:ib+4+16*5-1] }), wire.ErrINT},
		{"ack N 6", mutate(ack, set(ab, 6, 6)), wire.ErrINT},
		{"ack Cap != N", mutate(ack, set(ab+1, 4)), wire.ErrINT},
		{"ack truncated record", mutate(ack, func(b []byte) []byte { return b[:len(b)-1] }), wire.ErrINT},
		{"ack trailing byte", append(mutate(ack, same), 0), wire.ErrLength},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var p wire.Packet
			if err := p.Decode(tt.in); !errors.Is(err, tt.want) {
				t.Fatalf("Decode = %v, want %v", err, tt.want)
			}
		})
	}
	// At the limit: 5 slots and 5 hops decode.
	for _, p := range []wire.Packet{intData(10, 5, 5), intAck(5)} {
		var q wire.Packet
		if err := q.Decode(encode(t, &p)); err != nil {
			t.Fatalf("%v with 5 hops: %v", p.Type, err)
		}
	}
	// Encode refuses what Decode refuses.
	for _, p := range []wire.Packet{intData(10, 6, 5), intData(10, 0, 0), intData(10, 0, 6)} {
		if _, err := p.Encode(make([]byte, 4096)); !errors.Is(err, wire.ErrINT) {
			t.Fatalf("Encode N %d Cap %d = %v, want ErrINT", p.INT.N, p.INT.Cap, err)
		}
	}
	a := intAck(2)
	a.INT.Cap = 3
	if _, err := a.Encode(make([]byte, 4096)); !errors.Is(err, wire.ErrINT) {
		t.Fatalf("Encode ACK with Cap != N = %v", err)
	}
}

// TestStampINT: each stamp fills the next slot in order; a full block gets the overflow
// flag and keeps its records; packets without a well-formed block are left untouched.
func TestStampINT(t *testing.T) {
	p := intData(200, 0, 3)
	b := encode(t, &p)
	for i := range 3 {
		if v := wire.StampINT(b, hop(i)); v != wire.StampDone {
			t.Fatalf("stamp %d: %d", i, v)
		}
	}
	if v := wire.StampINT(b, hop(9)); v != wire.StampOverflow {
		t.Fatalf("fourth stamp on 3 slots: %d", v)
	}
	var q wire.Packet
	if err := q.Decode(b); err != nil {
		t.Fatal(err)
	}
	want := intData(200, 3, 3)
	want.INT.Flags = wire.INTOverflow
	intDiff(t, &want, &q)
	if !bytes.Equal(q.Payload, p.Payload) {
		t.Fatal("stamping changed the payload")
	}
	plain := dataPacket(200)
	bad := intData(200, 0, 3)
	for name, in := range map[string][]byte{
		"no flag": encode(t, &plain),
		"ack":     encode(t, ptr(intAck(1))),
		"cut":     encode(t, &bad)[:wire.DataHdrLen+10],
		"cap 6":   mutate(bad, set(wire.DataHdrLen+1, 6)),
		"short":   encode(t, &bad)[:30],
	} {
		orig := append([]byte(nil), in...)
		if v := wire.StampINT(in, hop(0)); v != wire.StampNone || !bytes.Equal(in, orig) {
			t.Fatalf("%s: stamp %d changed the packet", name, v)
		}
	}
	if a := testing.AllocsPerRun(100, func() { b[wire.DataHdrLen] = 0; wire.StampINT(b, hop(1)) }); a != 0 {
		t.Fatalf("StampINT allocates %v", a)
	}
}

func ptr(p wire.Packet) *wire.Packet { return &p }

// TestINTTrimmed: a trimming switch keeps the header and the INT block (TrimmedLen); the
// result decodes as trimmed with its records, for the receiver to NACK and echo.
func TestINTTrimmed(t *testing.T) {
	p := intData(4096, 2, 5)
	b := encode(t, &p)
	n := wire.TrimmedLen(b)
	if n != wire.DataHdrLen+wire.INTLen(5) {
		t.Fatalf("TrimmedLen %d", n)
	}
	var q wire.Packet
	if err := q.Decode(b[:n]); err != nil || !q.Trimmed() || len(q.Payload) != 0 {
		t.Fatalf("trimmed INT packet: %v, trimmed %v, %d payload bytes", err, q.Trimmed(), len(q.Payload))
	}
	intDiff(t, &p, &q)
	plain := dataPacket(4096)
	if n := wire.TrimmedLen(encode(t, &plain)); n != wire.DataHdrLen {
		t.Fatalf("TrimmedLen without INT %d", n)
	}
}
