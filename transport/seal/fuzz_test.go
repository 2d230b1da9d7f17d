package seal

import (
	"net/netip"
	"testing"
)

// FuzzOpen feeds arbitrary datagrams (seeded with real sealed packets and their
// mutations) to receivers in both modes: Open never panics, never accepts a packet the
// sender did not seal, and keeps no session for one it refuses.
func FuzzOpen(f *testing.F) {
	tx := newSealer(f, cfgWith(Encrypt, keyF), 1)
	sealed := map[string]bool{}
	for _, n := range []int{24, 64, 100, 300} {
		p := seal(f, tx, sec, addrB, packet(n, byte(n)), n, 64)
		sealed[string(p)] = true
		f.Add(p, uint8(64))
	}
	f.Add([]byte{}, uint8(0))
	f.Add(make([]byte, Overhead+1), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, hdr uint8) {
		for _, mode := range []Mode{Auth, Encrypt} {
			rx := newSealer(t, cfgWith(mode, keyF), 2)
			out := make([]byte, len(b))
			in := append([]byte(nil), b...)
			body, r := rx.Open(sec, netip.MustParseAddr("10.0.0.1"), in, int(hdr), out)
			if string(in) != string(b) {
				t.Fatal("Open wrote its input")
			}
			switch r {
			case OK, NewSession:
				// The split between authenticated-only and encrypted bytes must be the
				// sender's (encrypt, 64-byte header); packets no longer than their header
				// are authenticated whole in both modes.
				ad := func(m Mode, h int) int {
					if n := len(b) - Overhead; m == Auth || h >= n {
						return n
					}
					return h
				}
				if ad(mode, int(hdr)) != ad(Encrypt, 64) || !sealed[string(b)] {
					t.Fatalf("accepted a packet nobody sealed (mode %v, hdr %d, %d bytes)", mode, hdr, len(b))
				}
				if len(body) != len(b)-Overhead {
					t.Fatalf("body of %d bytes from %d", len(body), len(b))
				}
			default:
				if body != nil || rx.Sessions() != 0 {
					t.Fatalf("refused (%v) but returned a body or kept a session", r)
				}
			}
		}
	})
}
