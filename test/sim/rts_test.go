package sim

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/transport"
)

// TestReturnToSender: on the study's 3-tier fat tree (radix 4 here: 16 hosts) with small
// queues and hosts spraying at line rate, trimming to the receiver and return-to-sender
// trimming both complete every flow. With return to sender, every trimmed header goes
// back to its sender, which acts on it (none refused), and receivers send no NACK; the
// senders learn of their trims sooner on average: the mean delay from a lost
// transmission to its loss signal reaching the sender (a simulated-time measurement,
// deterministic for the seed) is below that of receiver NACKs. With trimmed_priority each
// trim is NACKed and resent once. Return to sender without trimming is refused, naming
// the field.
func TestReturnToSender(t *testing.T) {
	mk := func(rts bool) *Scenario {
		topo := TopologyConfig{Kind: "fattree3", Hosts: 16, Radix: 4, LinkRate: 100e9, LinkLatency: 1000,
			Queue: QueueConfig{Bytes: 32 << 10, ReturnToSender: rts}}
		sc := scenario(topo, WorkloadConfig{Kind: "permutation", Size: 1 << 20})
		sc.Transport = transport.DefaultConfig()
		sc.Transport.LinkRate, sc.Transport.BaseRTT = 0, 0
		sc.Transport.CC, sc.Transport.LB = "fixed_rate", "ops"
		sc.Transport.FixedRate.Fraction = 1
		sc.Transport.MaxRetransmits = 255
		sc.Transport.ReorderThreshold = 256
		sc.Transport.PSNWindow = 1024
		return sc
	}
	recv, rts := run(t, mk(false)), run(t, mk(true))
	for name, r := range map[string]*Result{"receiver NACK": recv, "return to sender": rts} {
		if r.Completed != r.Flows || r.Failed != 0 {
			t.Fatalf("%s: %d of %d flows completed, %d failed", name, r.Completed, r.Flows, r.Failed)
		}
		if r.Trims == 0 || r.LossSignals == 0 {
			t.Fatalf("%s: %d trims, %d loss signals: the queues should overflow", name, r.Trims, r.LossSignals)
		}
	}
	if recv.Returned != 0 || recv.NacksSent == 0 {
		t.Fatalf("receiver NACKs: %d returned, %d NACKs sent", recv.Returned, recv.NacksSent)
	}
	if rts.Returned != rts.Trims || rts.ReturnedRecv == 0 || rts.ReturnedBad != 0 || rts.NacksSent != 0 {
		t.Fatalf("return to sender: %d trims, %d returned, %d acted on, %d refused, %d NACKs sent; want every trim returned, none refused, no NACK",
			rts.Trims, rts.Returned, rts.ReturnedRecv, rts.ReturnedBad, rts.NacksSent)
	}
	if rts.RetxNack != rts.ReturnedRecv {
		t.Fatalf("return to sender: %d resent after a returned header, %d acted on", rts.RetxNack, rts.ReturnedRecv)
	}
	t.Logf("mean loss-signal delay: receiver NACK %.0f ns, return to sender %.0f ns", recv.LossSignalDelay, rts.LossSignalDelay)
	if !(rts.LossSignalDelay < recv.LossSignalDelay) {
		t.Fatalf("returned headers reach senders %.0f ns after the lost transmission on average, receiver NACKs %.0f ns: want sooner",
			rts.LossSignalDelay, recv.LossSignalDelay)
	}
	// Trimmed headers at control priority on the rest of their way (the study's and
	// htsim's model): each trim is one data packet cut once, and its receiver NACKs it.
	prio := mk(false)
	prio.Topology.Queue.TrimmedPriority = true
	rp := run(t, prio)
	if rp.Completed != rp.Flows || rp.Trims == 0 || rp.NacksSent != rp.Trims || rp.RetxNack != rp.Trims {
		t.Fatalf("trimmed_priority: %d of %d flows, %d trims, %d NACKs sent, %d resent; want one NACK and one resend per trim",
			rp.Completed, rp.Flows, rp.Trims, rp.NacksSent, rp.RetxNack)
	}
	sc := mk(true)
	off := false
	sc.Topology.Queue.Trim = &off
	if _, err := New(sc); err == nil || !strings.Contains(err.Error(), "return_to_sender") {
		t.Fatalf("return to sender without trimming: err %v", err)
	}
}

// TestHashLeavesOutNewFields: the summary fields added with return-to-sender trimming are
// left out of Result.Hash while zero (the loss-signal diagnostics always), so results from
// before they existed keep their hashes; the JSON summary always carries them (sweeps
// merge runs by their metric names).
func TestHashLeavesOutNewFields(t *testing.T) {
	var r Result
	var b strings.Builder
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"returned"`, `"returned_recv"`, `"returned_bad"`, `"loss_signals"`, `"loss_signal_delay_ns"`} {
		if !strings.Contains(b.String(), k) {
			t.Fatalf("JSON summary lacks %s", k)
		}
	}
	h0 := r.Hash()
	r.LossSignals, r.LossSignalDelay = 5, 1234
	if r.Hash() != h0 {
		t.Fatal("loss-signal diagnostics change the hash")
	}
	r.Returned = 1
	if r.Hash() == h0 {
		t.Fatal("returned headers do not change the hash")
	}
	// The hashed JSON is the summary without the new keys.
	var c Result
	var enc bytes.Buffer
	_ = json.NewEncoder(&enc).Encode(&c)
	legacy := strings.Replace(strings.Replace(enc.String(), hashLegacyReturned, "", 1), hashLegacyLoss, "", 1)
	if strings.Contains(legacy, "returned") || strings.Contains(legacy, "loss_signal") {
		t.Fatalf("hashed summary still names the new fields: %s", legacy)
	}
}
