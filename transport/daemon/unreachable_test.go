package daemon

import "testing"

// The ICMP report bound: a burst of unreachBurst passes at once, one more does not, and
// the bucket refills at unreachRate a second, never beyond the burst.
func TestReportBucketBound(t *testing.T) {
	var b reportBucket
	now := int64(1e9)
	if got := b.take(now, unreachBurst); got != unreachBurst {
		t.Fatalf("first burst: %d of %d", got, unreachBurst)
	}
	if got := b.take(now, 1); got != 0 {
		t.Fatalf("beyond the burst: %d taken", got)
	}
	now += 1e9 / unreachRate * 10 // ten reports' worth
	if got := b.take(now, 16); got != 10 {
		t.Fatalf("after 10 reports' time: %d taken, want 10", got)
	}
	now += 3600e9
	if got := b.take(now, 1000); got != unreachBurst {
		t.Fatalf("after an hour: %d taken, want the burst %d", got, unreachBurst)
	}
}
