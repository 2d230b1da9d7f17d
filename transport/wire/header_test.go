package wire_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

// EncodeHeader writes exactly the bytes of Encode's output before the payload (with and
// without an INT block), checks the payload's length as Encode does, needs a buffer of
// only the header's length, allocates nothing, and encodes other types whole.
func TestEncodeHeader(t *testing.T) {
	for _, n := range []int{1, 1000, 4096} {
		for _, withINT := range []bool{false, true} {
			p := dataPacket(n)
			if withINT {
				p.Flags |= wire.FlagINT
				p.INT.Cap = 3
			}
			whole := make([]byte, 9000)
			wn, err := p.Encode(whole)
			if err != nil {
				t.Fatal(err)
			}
			hl := wn - n
			buf := make([]byte, hl) // room for the header only
			hn, err := p.EncodeHeader(buf)
			if err != nil || hn != hl {
				t.Fatalf("n %d INT %v: EncodeHeader %d, %v; want %d", n, withINT, hn, err, hl)
			}
			if got := append(buf[:hn:hn], p.Payload...); !bytes.Equal(got, whole[:wn]) {
				t.Fatalf("n %d INT %v: header + payload differ from Encode's datagram", n, withINT)
			}
			var q wire.Packet
			if err := q.Decode(whole[:wn]); err != nil || !bytes.Equal(q.Payload, p.Payload) {
				t.Fatalf("decode: %v", err)
			}
			if _, err := p.EncodeHeader(buf[:hl-1]); !errors.Is(err, wire.ErrBuffer) {
				t.Fatalf("a buffer one byte short: %v, want ErrBuffer", err)
			}
			p.Data.PayloadLen++ // Payload's length disagrees
			if _, err := p.EncodeHeader(buf); !errors.Is(err, wire.ErrLength) {
				t.Fatalf("payload length mismatch: %v, want ErrLength", err)
			}
		}
	}
	ack := ackPacket(2, 0)
	a, b := make([]byte, 512), make([]byte, 512)
	an, err1 := ack.Encode(a)
	bn, err2 := ack.EncodeHeader(b)
	if err1 != nil || err2 != nil || !bytes.Equal(a[:an], b[:bn]) {
		t.Fatalf("an ACK: EncodeHeader differs from Encode (%v, %v)", err1, err2)
	}
	p := dataPacket(4096)
	buf := make([]byte, 128)
	if a := testing.AllocsPerRun(100, func() { _, _ = p.EncodeHeader(buf) }); a != 0 {
		t.Fatalf("EncodeHeader: %v allocations, want 0", a)
	}
}
