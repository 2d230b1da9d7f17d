package wire_test

import (
	"bytes"
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

// bundle encodes ack with FlagBundle and data behind it in one datagram.
func bundle(ack, data wire.Packet) []byte {
	ack.Flags |= wire.FlagBundle
	return append(mutate(ack, same), mutate(data, same)...)
}

// TestBundleSplit: an ACK with FlagBundle splits at its own length (with and without an
// INT echo and clean EVs) and both halves decode; anything else comes back whole.
func TestBundleSplit(t *testing.T) {
	for name, ack := range map[string]wire.Packet{"ack/1w": ackPacket(1, 0), "ack/4w/clean": ackPacket(4, wire.MaxCleanEVs), "ack/int": intAck(3)} {
		data := dataPacket(64)
		b := bundle(ack, data)
		lead, rest := wire.BundleSplit(b)
		if len(lead) != ack.EncodedLen() || len(rest) != data.EncodedLen() || !wire.BundledData(rest) {
			t.Fatalf("%s: split %d + %d bytes, want %d + %d", name, len(lead), len(rest), ack.EncodedLen(), data.EncodedLen())
		}
		var p wire.Packet
		if err := p.Decode(lead); err != nil || p.Type != wire.TypeAck || p.Flags&wire.FlagBundle == 0 {
			t.Fatalf("%s: lead decodes to %v, %v", name, p.Type, err)
		}
		if err := p.Decode(rest); err != nil || p.Type != wire.TypeData || len(p.Payload) != 64 {
			t.Fatalf("%s: rest decodes to %v, %v", name, p.Type, err)
		}
		// The same ACK without the flag is one packet with trailing bytes: not split, and
		// Decode refuses it.
		plain := append(mutate(ack, same), mutate(data, same)...)
		if l, r := wire.BundleSplit(plain); r != nil || len(l) != len(plain) {
			t.Fatalf("%s: an ACK without FlagBundle split", name)
		}
		if err := p.Decode(plain); err != wire.ErrLength {
			t.Fatalf("%s: ACK with trailing bytes and no FlagBundle: %v, want ErrLength", name, err)
		}
	}
	// A flagged ACK with nothing behind it is one packet; a sealed one is never split.
	ack := ackPacket(2, 0)
	ack.Flags |= wire.FlagBundle
	alone := mutate(ack, same)
	if l, r := wire.BundleSplit(alone); r != nil || len(l) != len(alone) {
		t.Fatal("a flagged ACK alone split")
	}
	sealed := bundle(ackPacket(2, 0), dataPacket(64))
	sealed[1] |= byte(wire.FlagSealed)
	if _, r := wire.BundleSplit(sealed); r != nil {
		t.Fatal("a sealed ACK split")
	}
	// Only DATA may follow, unsealed and at least a header long.
	for name, rest := range map[string][]byte{
		"ack":    mutate(ackPacket(1, 0), same),
		"short":  mutate(dataPacket(64), same)[:wire.DataHdrLen-1],
		"sealed": mutate(dataPacket(64), set(1, byte(wire.FlagSealed))),
		"v2":     mutate(dataPacket(64), set(0, 0x21)),
	} {
		if wire.BundledData(rest) {
			t.Errorf("BundledData(%s) = true", name)
		}
	}
}

// FuzzBundleSplit: BundleSplit never panics, and a split is a cut of the datagram with a
// non-empty rest.
func FuzzBundleSplit(f *testing.F) {
	f.Add(bundle(ackPacket(1, 0), dataPacket(64)))
	f.Add(bundle(intAck(3), dataPacket(100)))
	f.Add(bundle(ackPacket(4, wire.MaxCleanEVs), dataPacket(1)))
	f.Fuzz(func(t *testing.T, b []byte) {
		lead, rest := wire.BundleSplit(b)
		if rest == nil {
			if !bytes.Equal(lead, b) {
				t.Fatal("unsplit datagram changed")
			}
			return
		}
		if len(rest) == 0 || len(lead)+len(rest) != len(b) || !bytes.Equal(append(append([]byte(nil), lead...), rest...), b) {
			t.Fatalf("split %d + %d of %d bytes", len(lead), len(rest), len(b))
		}
		if len(lead) < wire.AckFixedLen || len(lead) > wire.MaxAckLen {
			t.Fatalf("lead of %d bytes, outside an ACK's %d..%d", len(lead), wire.AckFixedLen, wire.MaxAckLen)
		}
	})
}
