package eqds_test

import (
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/cctest"
	"github.com/smartt-transport/smartt/transport"
)

// incast runs an n:1 incast of msg bytes per sender under EQDS on the cctest rig,
// sampling the bottleneck (the receiver's port) every 500 ns.
func incast(t *testing.T, n, msg int, trim bool, queueTarget int) (r *cctest.Rig, recs []*cctest.Recorder, took, ideal int64) {
	t.Helper()
	recs = make([]*cctest.Recorder, n)
	r = cctest.New(t, cctest.Options{Senders: n, Trim: trim, Seed: 3, SampleNs: 500,
		Mod: func(c *transport.Config) { c.CC = "eqds"; c.EQDS.QueueTargetMTUs = queueTarget },
		NewCC: func(i int) cc.Controller {
			reg, _ := transport.LookupCC("eqds")
			cfg := cctest.Config(trim)
			cfg.CC = "eqds"
			cfg.EQDS.QueueTargetMTUs = queueTarget
			f, err := reg.Prepare(&cfg)
			if err != nil {
				t.Fatal(err)
			}
			recs[i] = &cctest.Recorder{Controller: f(), Record: true}
			return recs[i]
		}})
	took, ideal = r.Incast(msg)
	return r, recs, took, ideal
}

// queueAfter returns the mean and largest data-queue bytes of the receiver's port from
// from ns after the incast's start to one base RTT before its end.
func queueAfter(t *testing.T, r *cctest.Rig, took, from int64) (mean, peak int64) {
	t.Helper()
	start := r.Net.Now() - took
	var sum, cnt int64
	for _, s := range r.Net.Samples(r.RXAddr) {
		if s.Time < start+from || s.Time > r.Net.Now()-cctest.BaseRTT() {
			continue
		}
		sum += int64(s.Data)
		cnt++
		peak = max(peak, int64(s.Data))
	}
	if cnt < 100 {
		t.Fatalf("%d queue samples", cnt)
	}
	return sum / cnt, peak
}

// TestIncastPacedAtLineRate is EQDS's defining behaviour: the receiver's one pacer
// schedules all senders at its link rate. 16 senders start together, each with a
// speculative window of one BDP (16 BDPs against a 1-BDP buffer: the first RTT fills
// it and trims); once those windows have drained (from the sixth base RTT to the end)
// the receiver's port holds no more than the pacer's 2-MTU target, the link stays
// busy (completion within 5 % of ideal) and the shares are equal (round robin).
func TestIncastPacedAtLineRate(t *testing.T) {
	const n, msg = 16, 2 << 20
	r, recs, took, ideal := incast(t, n, msg, true, 2)
	mean, peak := queueAfter(t, r, took, 6*cctest.BaseRTT())
	half := r.Net.Now() - took/2
	var shares []float64
	for _, f := range recs {
		shares = append(shares, float64(f.AckedAt(half)))
	}
	ps := r.Net.PortStats(r.RXAddr)
	j := cctest.Jain(shares)
	t.Logf("%d:1, %d MiB each: %.3f x ideal; receiver port after 6 RTTs: mean %d B, max %d B (BDP %d B); Jain %.4f; trims %d",
		n, msg>>20, float64(took)/float64(ideal), mean, peak, cctest.BDP(), j, ps.Trims)
	if float64(took) > 1.05*float64(ideal) {
		t.Errorf("incast took %.3f x ideal: the receiver's link was not kept busy", float64(took)/float64(ideal))
	}
	if ps.Trims == 0 {
		t.Errorf("no trims: the speculative windows (%d BDPs into a 1-BDP buffer) should overflow", n)
	}
	if mean > int64(2*(cctest.MTU+64)) || peak > int64(3*(cctest.MTU+64)) {
		t.Errorf("queue after 6 RTTs: mean %d B, max %d B; want mean <= 2 packets, max <= 3", mean, peak)
	}
	if j < 0.99 {
		t.Errorf("Jain %.4f over the first half", j)
	}
}

// Without the drain (queue_target_mtus 0, the paper's pacer) the queue the speculative
// windows built stands for the whole incast: data arrives exactly as fast as it leaves.
// The link is as busy; only the queueing differs.
func TestIncastWithoutDrainKeepsTheQueue(t *testing.T) {
	const n, msg = 16, 1 << 20
	r, _, took, ideal := incast(t, n, msg, true, 0)
	mean, _ := queueAfter(t, r, took, 6*cctest.BaseRTT())
	t.Logf("no drain: %.3f x ideal; receiver port after 6 RTTs: mean %d B (BDP %d B)", float64(took)/float64(ideal), mean, cctest.BDP())
	if mean < int64(cctest.BDP()/2) {
		t.Errorf("mean queue %d B without the drain: expected the first RTT's queue to stand", mean)
	}
	if float64(took) > 1.05*float64(ideal) {
		t.Errorf("incast took %.3f x ideal", float64(took)/float64(ideal))
	}
}

// Trimming is optional: without it (drops instead of trims) the speculative first
// windows lose packets, which come back by SACK gap or timeout, their credit with
// them, and the incast completes as with trimming, where each loss is a NACK at once.
func TestIncastWithoutTrimming(t *testing.T) {
	const n, msg = 8, 1 << 20
	rt, _, tookTrim, ideal := incast(t, n, msg, true, 2)
	rd, _, tookDrop, _ := incast(t, n, msg, false, 2)
	st, sd := rt.Net.PortStats(rt.RXAddr), rd.Net.PortStats(rd.RXAddr)
	var nackT, retxD uint64
	for _, e := range rt.TX {
		nackT += e.Stats().RetxNack
	}
	for _, e := range rd.TX {
		s := e.Stats()
		retxD += s.RetxSack + s.RetxTimeout
	}
	t.Logf("trimming: %.3f x ideal, %d trims, %d NACK resends; dropping: %.3f x ideal, %d drops, %d SACK/timeout resends",
		float64(tookTrim)/float64(ideal), st.Trims, nackT, float64(tookDrop)/float64(ideal), sd.Drops, retxD)
	if st.Trims == 0 || nackT == 0 || st.Drops != 0 {
		t.Errorf("with trimming: %d trims, %d NACK resends, %d drops", st.Trims, nackT, st.Drops)
	}
	if sd.Drops == 0 || retxD < sd.Drops || sd.Trims != 0 {
		t.Errorf("without trimming: %d drops, %d resends, %d trims", sd.Drops, retxD, sd.Trims)
	}
	for _, took := range []int64{tookTrim, tookDrop} {
		if float64(took) > 1.1*float64(ideal) {
			t.Errorf("incast took %.3f x ideal", float64(took)/float64(ideal))
		}
	}
}
