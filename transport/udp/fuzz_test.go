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
	if tos, ts, _, _, _ := parseRxOOB(oob[:n]); tos != 46<<2|CE || ts != 0 {
		t.Fatalf("TCLASS: tos %#x ts %d", tos, ts)
	}
	// An IP_TOS message carries one byte.
	n = putCmsg(oob, unix.IPPROTO_IP, unix.IP_TOS, 10<<2|ECT0)
	if tos, _, _, _, _ := parseRxOOB(oob[:n]); tos != 10<<2|ECT0 {
		t.Fatalf("IP_TOS: tos %#x", tos)
	}
	// Truncated data is ignored, not read past.
	if tos, ts, _, _, _ := parseRxOOB(oob[:n-6]); tos != 0 || ts != 0 {
		t.Fatalf("truncated: tos %#x ts %d", tos, ts)
	}
}
