package sim

import (
	"testing"
)

// EQDS in the simulator (cc eqds, receiver-driven credit): a 32:1 incast of 1 MiB on
// the 128-host fat tree at 800 Gbit/s with 1-BDP queues. The 32 speculative first
// windows overflow the receiver's ToR port (trims), after which the receiver's pacer
// alone sets the pace: the port toward the receiver holds a few packets on average from
// the tenth base RTT to the end, and the incast completes within 5 % of ideal.
// With the drain off (the paper's line-rate pacer) the first RTT's queue stands.
func TestIncastEQDS(t *testing.T) {
	const n, size = 32, 1 << 20
	mk := func(target int) (*Result, *Sim) {
		sc := scenario(TopologyConfig{Kind: "fattree2", Hosts: 128, Radix: 16, LinkRate: 800e9, LinkLatency: 600, SwitchLatency: 400},
			WorkloadConfig{Kind: "incast", Senders: n, Receiver: 0, Size: size})
		sc.Transport.CC = "eqds"
		sc.Transport.LB = "ops"
		sc.Transport.EQDS.QueueTargetMTUs = target
		sc.Output = OutputConfig{SampleInterval: 200, SamplePorts: "tor0->h0"}
		s, err := New(sc)
		if err != nil {
			t.Fatal(err)
		}
		r := s.Run()
		t.Log(r.Summary())
		if r.Completed != n || r.Failed != 0 {
			t.Fatalf("%d/%d flows", r.Completed, n)
		}
		return r, s
	}
	for _, target := range []int{2, 0} {
		r, s := mk(target)
		if r.Ratio > 1.05 {
			t.Errorf("target %d: completion %.3f x ideal", target, r.Ratio)
		}
		if r.Trims == 0 || r.RetxNack == 0 {
			t.Errorf("target %d: %d trims, %d NACK resends: the speculative windows should overflow", target, r.Trims, r.RetxNack)
		}
		brtt := s.baseRTT(s.tp.maxLinks, 4096)
		if len(r.Samples) != 1 {
			t.Fatalf("%d sampled ports", len(r.Samples))
		}
		q := r.Samples[0]
		var sum, cnt, peak int64
		for i, at := range q.Times {
			if at < 10*brtt || at > r.SimTime-2*brtt {
				continue
			}
			sum += int64(q.Bytes[i])
			cnt++
			peak = max(peak, int64(q.Bytes[i]))
		}
		if cnt < 100 {
			t.Fatalf("%d samples", cnt)
		}
		bdp := int64(800e9 / 8 * float64(brtt) / 1e9)
		t.Logf("target %d MTUs: port tor0->h0 from 10 base RTTs (%d ns): mean %d B, max %d B; BDP %d B", target, brtt, sum/cnt, peak, bdp)
		switch {
		case target > 0 && (sum/cnt > 3*4160 || peak > bdp/4):
			// A transient of about 150 KB around the 17th base RTT is not explained yet.
			t.Errorf("queue at the receiver's port: mean %d B, max %d B; want mean <= 3 packets, max <= BDP/4", sum/cnt, peak)
		case target == 0 && sum/cnt < bdp/2:
			t.Errorf("without the drain the queue should stand: mean %d B, BDP %d B", sum/cnt, bdp)
		}
	}
}
