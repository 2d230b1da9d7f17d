//go:build linux

package udp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport/wire"
)

// A first contact (DATA or PROBE to no connection yet, unsealed) that strays onto an EV
// port is answered with an EV-port RESET to its reply port; anything else is not.
func TestStrayAnswer(t *testing.T) {
	from := netip.MustParseAddrPort("10.0.0.2:30001")
	enc := func(p wire.Packet) []byte {
		b := make([]byte, 2048)
		n, err := p.Encode(b)
		if err != nil {
			t.Fatal(err)
		}
		return b[:n]
	}
	data := wire.Packet{Header: wire.Header{Type: wire.TypeData, ReplyPort: 23600, SrcConn: 0xabc}}
	data.Data.PayloadLen, data.Data.MsgLen = 4, 4
	data.Payload = []byte("abcd")
	var st strayState
	to, ok := st.answer(enc(data), from)
	if !ok || to != netip.MustParseAddrPort("10.0.0.2:23600") {
		t.Fatalf("first-contact DATA: answer %v %v, want one to the reply port", to, ok)
	}
	var r wire.Packet
	if err := r.Decode(st.reset[:]); err != nil || r.Type != wire.TypeReset || r.DstConn != 0xabc || r.SrcConn != 0xabc {
		t.Fatalf("answer %+v (%v), want a RESET with DstConn = SrcConn = 0xabc", r.Header, err)
	}
	probe := wire.Packet{Header: wire.Header{Type: wire.TypeProbe, SrcConn: 7}}
	if to, ok := st.answer(enc(probe), from); !ok || to != from {
		t.Errorf("first-contact PROBE without reply port: %v %v, want an answer to its source", to, ok)
	}
	known := data
	known.DstConn = 5
	sealed := data
	sealed.Flags |= wire.FlagSealed
	for name, b := range map[string][]byte{"to a connection": enc(known), "sealed": enc(sealed), "garbage": []byte("hello, world, not smartt"),
		"close": enc(wire.Packet{Header: wire.Header{Type: wire.TypeClose, DstConn: 1, SrcConn: 2}})} {
		if _, ok := st.answer(b, from); ok {
			t.Errorf("%s: answered", name)
		}
	}
}

// The answers are rate-limited: a burst, then the rate.
func TestStrayBucket(t *testing.T) {
	var st strayState
	now := time.Unix(100, 0)
	n := 0
	for range 100 {
		if st.take(now) {
			n++
		}
	}
	if n != strayBurst {
		t.Fatalf("burst %d, want %d", n, strayBurst)
	}
	if st.take(now.Add(time.Second/strayRate/2)) || !st.take(now.Add(2*time.Second/strayRate)) {
		t.Error("the bucket does not refill at the rate")
	}
}
