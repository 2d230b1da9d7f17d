package apitypes

import (
	"errors"
	"testing"
	"time"
)

// SentInfo's durations travel as u64 nanoseconds and come back as the same time.Duration.
func TestSentInfoDurations(t *testing.T) {
	in := SentInfo{Elapsed: 1500 * time.Microsecond, SRTT: 12 * time.Microsecond, Window: 65536, Retransmit: 3}
	b := in.Append(nil)
	if len(b) != SentInfoLen || b[5] != 0x16 || b[6] != 0xe3 || b[7] != 0x60 { // 1_500_000 ns = 0x16e360
		t.Fatalf("encoded % x", b)
	}
	out, err := ParseSentInfo(b)
	if err != nil || out != in {
		t.Fatalf("decoded %+v, %v; want %+v", out, err, in)
	}
	if _, err := ParseSentInfo(b[:31]); err == nil {
		t.Fatal("a short Sent payload decoded")
	}
}

// TestRecvRingPayload: a RecvRing payload is the size alone (8 bytes, what daemons
// before RecvRingHeader take) or the size and the smallest message for the ring (16);
// any other length is refused.
func TestRecvRingPayload(t *testing.T) {
	if b := AppendRecvRing(nil, 1<<20, 0); len(b) != 8 {
		t.Fatalf("without a minimum: %d bytes, want 8", len(b))
	}
	for _, c := range []struct{ size, min uint64 }{{1 << 20, 0}, {64 << 20, 64 << 10}, {4096, 1}} {
		size, least, err := ParseRecvRing(AppendRecvRing(nil, c.size, c.min))
		if err != nil || size != c.size || least != c.min {
			t.Errorf("%+v: parsed %d, %d, %v", c, size, least, err)
		}
	}
	for _, n := range []int{0, 4, 12, 24} {
		if _, _, err := ParseRecvRing(make([]byte, n)); !errors.Is(err, ErrPayload) {
			t.Errorf("%d-byte payload: %v, want ErrPayload", n, err)
		}
	}
}
