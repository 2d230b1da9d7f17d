package switchport

import (
	"math/bits"
	"net/netip"
)

// FiveTuple is what a switch hashes to choose among equal-cost next hops. SrcPort is
// where the sender puts the packet's entropy value (EV).
type FiveTuple struct {
	Src, Dst         netip.Addr
	Proto            uint8
	SrcPort, DstPort uint16
}

// Hash returns the ECMP hash of t under a switch's salt: every switch hashes with its
// own salt, so the choices at successive tiers are independent.
func (t *FiveTuple) Hash(salt uint64) uint64 {
	s, d := t.Src.As16(), t.Dst.As16()
	return HashWords(salt,
		le64(s[0:8]), le64(s[8:16]), le64(d[0:8]), le64(d[8:16]),
		uint64(t.Proto)<<32|uint64(t.SrcPort)<<16|uint64(t.DstPort))
}

// Hash4 is Hash for IPv4 addresses given as 32-bit integers, without netip.
func Hash4(salt uint64, src, dst uint32, proto uint8, sport, dport uint16) uint64 {
	h := mix(salt ^ 0x243f6a8885a308d3 ^ (uint64(src)<<32 | uint64(dst)))
	return mix(h ^ (uint64(proto)<<32 | uint64(sport)<<16 | uint64(dport)))
}

// HashWords mixes words under salt (a multiply-xorshift chain; well spread in every bit).
func HashWords(salt uint64, words ...uint64) uint64 {
	h := salt ^ 0x243f6a8885a308d3
	for _, w := range words {
		h = mix(h ^ w)
	}
	return h
}

func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Pick maps a hash onto n next hops (n > 0) without the bias of a modulo.
func Pick(h uint64, n int) int {
	hi, _ := bits.Mul64(h, uint64(n))
	return int(hi)
}

func le64(b []byte) uint64 {
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}
