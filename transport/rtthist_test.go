package transport

import "testing"

func TestRTTBucketBounds(t *testing.T) {
	for _, rtt := range []int64{1, 1023, 1024, 2047, 2048, 12_000, 1_000_000, 1 << 40} {
		b := rttBucket(rtt)
		if b < RTTBuckets-1 && rtt >= RTTBucketBound(b) {
			t.Errorf("rtt %d in bucket %d whose bound is %d", rtt, b, RTTBucketBound(b))
		}
		if b > 0 && rtt < RTTBucketBound(b-1) {
			t.Errorf("rtt %d in bucket %d but below the previous bound %d", rtt, b, RTTBucketBound(b-1))
		}
	}
	if rttBucket(1<<40) != RTTBuckets-1 {
		t.Errorf("huge RTT not in the last bucket")
	}
}

func TestRTTHistCountsEverySample(t *testing.T) {
	p := newPair(t, DefaultConfig(), 5000) // 10 us RTT: bucket [8192, 16384) ns
	id, err := p.a.Dial(0, p.bAddr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.a.Send(0, id, make([]byte, 100_000)); err != nil {
		t.Fatal(err)
	}
	sent := false
	p.runUntil(t, 1e9, func() bool {
		for ev := range pending(p.a) {
			sent = sent || ev.Kind == MessageSent
		}
		return sent
	})
	st := p.a.Stats()
	var sum uint64
	for _, n := range st.RTTHist {
		sum += n
	}
	if sum == 0 || sum != st.RTTSamples {
		t.Fatalf("histogram holds %d samples, RTTSamples = %d", sum, st.RTTSamples)
	}
	if st.RTTHist[rttBucket(10_000)] == 0 {
		t.Fatalf("no sample in the 10 us bucket: %v", st.RTTHist)
	}
}

func TestConnInfoMatchesConns(t *testing.T) {
	p := newPair(t, DefaultConfig(), 5000)
	id, err := p.a.Dial(0, p.bAddr)
	if err != nil {
		t.Fatal(err)
	}
	ci, ok := p.a.ConnInfo(id)
	all := p.a.Conns(nil)
	if !ok || len(all) != 1 || ci != all[0] {
		t.Fatalf("ConnInfo %+v %v, Conns %+v", ci, ok, all)
	}
	if _, ok := p.a.ConnInfo(id + 1); ok {
		t.Fatal("ConnInfo of an unknown connection")
	}
}
