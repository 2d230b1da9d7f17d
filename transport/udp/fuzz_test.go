//go:build linux

package udp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// Control data is the kernel's, but a parser must never fall over whatever it is given.
func FuzzParseRxOOB(f *testing.F) {
	oob := make([]byte, 128)
	n := putCmsg(oob, unix.IPPROTO_IP, unix.IP_TOS, 0x2b)
	f.Add(oob[:n])
	n = putCmsg(oob, unix.IPPROTO_IPV6, unix.IPV6_TCLASS, 0xb9)
	f.Add(oob[:n])
	f.Add([]byte{})
	f.Add(make([]byte, 17))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseRxOOB(b)
	})
}

func TestParseRxOOB(t *testing.T) {
	oob := make([]byte, 128)
	n := putCmsg(oob, unix.IPPROTO_IPV6, unix.IPV6_TCLASS, 46<<2|CE)
	if r := parseRxOOB(oob[:n]); r.tos != 46<<2|CE || r.ts != 0 {
		t.Fatalf("TCLASS: tos %#x ts %d", r.tos, r.ts)
	}
	// An IP_TOS message carries one byte.
	n = putCmsg(oob, unix.IPPROTO_IP, unix.IP_TOS, 10<<2|ECT0)
	if r := parseRxOOB(oob[:n]); r.tos != 10<<2|ECT0 {
		t.Fatalf("IP_TOS: tos %#x", r.tos)
	}
	// Truncated data is ignored, not read past.
	if r := parseRxOOB(oob[:n-6]); r.tos != 0 || r.ts != 0 {
		t.Fatalf("truncated: tos %#x ts %d", r.tos, r.ts)
	}
	// TTL (IPv4) and hop limit (IPv6) come as ints, beside the TOS byte.
	n = putCmsg(oob, unix.IPPROTO_IP, unix.IP_TOS, 10<<2|ECT0)
	n += putCmsg(oob[n:], unix.IPPROTO_IP, unix.IP_TTL, 61)
	if r := parseRxOOB(oob[:n]); r.ttl != 61 || r.tos != 10<<2|ECT0 {
		t.Fatalf("IP_TTL: ttl %d tos %#x", r.ttl, r.tos)
	}
	n = putCmsg(oob, unix.IPPROTO_IPV6, unix.IPV6_HOPLIMIT, 250)
	if r := parseRxOOB(oob[:n]); r.ttl != 250 {
		t.Fatalf("IPV6_HOPLIMIT: %d", r.ttl)
	}
}
