package seal

import (
	"encoding/binary"
	"fmt"
	"testing"
)

var benchSizes = []struct {
	name string
	n    int // packet bytes before the trailer
}{{"64B", 64}, {"4KiB", 64 + 4096}}

// BenchmarkSeal: one packet sealed per op (a DATA packet of 4 KiB payload and its 64-byte
// header, or a 64-byte packet); MB/s counts the packet's bytes.
func BenchmarkSeal(b *testing.B) {
	for _, mode := range []Mode{Auth, Encrypt} {
		for _, sz := range benchSizes {
			b.Run(fmt.Sprintf("%v/%s", mode, sz.name), func(b *testing.B) {
				tx := newSealer(b, cfgWith(mode, keyF), 1)
				buf := packet(sz.n, 0)
				now := sec
				b.SetBytes(int64(sz.n))
				b.ReportAllocs()
				for b.Loop() {
					now += 100
					if _, err := tx.Seal(now, addrB, buf, sz.n, 64); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkOpen: one packet opened per op, in order on one session (each op seals a fresh
// packet first, outside the timer's share: see the seal figures to subtract).
func BenchmarkOpen(b *testing.B) {
	for _, mode := range []Mode{Auth, Encrypt} {
		for _, sz := range benchSizes {
			b.Run(fmt.Sprintf("%v/%s", mode, sz.name), func(b *testing.B) {
				tx := newSealer(b, cfgWith(mode, keyF), 1)
				rx := newSealer(b, cfgWith(mode, keyF), 2)
				// Pre-seal a ring of packets; the ring is re-sealed (new counters) when used up.
				const ring = 1024
				pk := make([][]byte, ring)
				for i := range pk {
					pk[i] = packet(sz.n, byte(i))
				}
				out := make([]byte, sz.n+Overhead)
				now := sec
				fill := func() {
					for i := range pk {
						if _, err := tx.Seal(now, addrB, pk[i], sz.n, 64); err != nil {
							b.Fatal(err)
						}
					}
				}
				fill()
				b.SetBytes(int64(sz.n))
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if i == ring {
						b.StopTimer()
						fill()
						i = 0
						b.StartTimer()
					}
					if _, r := rx.Open(now, addrA, pk[i], 64, out); r != OK && r != NewSession {
						b.Fatal(r)
					}
					i++
				}
			})
		}
	}
}

// BenchmarkOpenForged: what a forged 64-byte packet costs the receiver: on a session it
// holds (one tag check); naming a new session ID every time without its check (a blind
// forger: one AES block); naming one unknown session ID with a valid check again and
// again (the derived key is cached); and a new one with a valid check every time (a key
// derivation each, the worst: only a key holder, or an on-path attacker replaying many
// real session IDs to a host that does not hold them, can do this).
func BenchmarkOpenForged(b *testing.B) {
	const n = 64
	setup := func(b *testing.B) (*Sealer, []byte) {
		tx := newSealer(b, cfgWith(Auth, keyF), 1)
		rx := newSealer(b, cfgWith(Auth, keyF), 2)
		buf := packet(n, 0)
		m, _ := tx.Seal(sec, addrB, buf, n, 64)
		if _, r := rx.Open(sec, addrA, buf[:m], 64, nil); r != NewSession {
			b.Fatal(r)
		}
		return rx, buf[:m]
	}
	b.Run("known-session", func(b *testing.B) {
		rx, p := setup(b)
		b.ReportAllocs()
		c := uint32(2)
		for b.Loop() {
			c++
			binary.BigEndian.PutUint32(p[n+TagLen+SessionIDLen:], c)
			if _, r := rx.Open(sec, addrA, p, 64, nil); r != Failed {
				b.Fatal(r)
			}
		}
	})
	b.Run("same-new-session-checked", func(b *testing.B) {
		rx, p := setup(b)
		forgeSession(rx, rx.fabric, p, 12345) // another session ID, fixed
		b.ReportAllocs()
		for b.Loop() {
			if _, r := rx.Open(sec, addrA, p, 64, nil); r != Failed {
				b.Fatal(r)
			}
		}
	})
	for _, checked := range []bool{false, true} {
		name := "new-session-each-blind"
		if checked {
			name = "new-session-each-checked"
		}
		b.Run(name, func(b *testing.B) {
			rx, p := setup(b)
			k := rx.fabric
			if !checked {
				k = nil
			}
			b.ReportAllocs()
			x := uint64(0)
			for b.Loop() {
				x++
				forgeSession(rx, k, p, x)
				if _, r := rx.Open(sec, addrA, p, 64, nil); r != Failed {
					b.Fatal(r)
				}
			}
		})
	}
}
