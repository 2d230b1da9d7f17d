package apitypes

import (
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
