package transport_test

import (
	"fmt"
	"testing"

	"github.com/smartt-transport/smartt/test/testnet"
	"github.com/smartt-transport/smartt/transport"
)

// TestReorderingCausesNoRetransmissionStorm pins SACK-gap detection under reordering
// without loss: reordering shallower than the threshold costs no retransmission at all,
// and deeper reordering costs at most one retransmission per held-back packet (a late
// original must not be credited with its retransmission's send position, which would
// declare everything sent in between lost).
func TestReorderingCausesNoRetransmissionStorm(t *testing.T) {
	for _, depth := range []int{0, 20, 100} {
		t.Run(fmt.Sprintf("depth=%d", depth), func(t *testing.T) {
			n := testnet.New(testnet.Config{Delay: 2000, ReorderProb: 0.1, ReorderDepth: depth}, 1)
			cfg := transport.DefaultConfig()
			ep, ad := twoHosts(t, n, cfg, 1)
			id, _ := ep[0].Dial(0, ad[1])
			for k := 0; k < 10; k++ {
				ep[0].Send(0, id, make([]byte, 1<<20))
			}
			n.Wake(ad[0])
			if !receiveAll(n, ep[1], 10) {
				t.Fatal("transfer did not complete")
			}
			s := ep[0].Stats()
			retx := s.RetxSack + s.RetxTimeout + s.RetxNack
			held := n.Stats().Reordered
			t.Logf("data %d, held back %d, retransmitted %d (sack %d, timeout %d)", s.DataSent, held, retx, s.RetxSack, s.RetxTimeout)
			if depth < cfg.ReorderThreshold && retx != 0 {
				t.Fatalf("%d retransmissions with reordering shallower than the threshold", retx)
			}
			if retx > held {
				t.Fatalf("%d retransmissions for %d held-back packets", retx, held)
			}
		})
	}
}

// Issue 15: with Ack.OnReorder off, reordering shallower than the reorder threshold no
// longer forces an ACK per packet, so Every coalesces (far fewer ACKs than the legacy
// policy), and the transfer still completes without a retransmission (the legacy policy, coalescing
// only within a poll, does see a few here).
func TestAckPolicyUnderReordering(t *testing.T) {
	acks := map[bool]uint64{}
	for _, onReorder := range []bool{true, false} {
		n := testnet.New(testnet.Config{Delay: 2000, ReorderProb: 0.3, ReorderDepth: 8}, 1)
		cfg := transport.DefaultConfig()
		cfg.Ack.Every, cfg.Ack.CleanEVs, cfg.Ack.OnReorder, cfg.Ack.OnCE = 8, true, onReorder, true
		ep, ad := twoHosts(t, n, cfg, 1)
		id, _ := ep[0].Dial(0, ad[1])
		for k := 0; k < 4; k++ {
			ep[0].Send(0, id, make([]byte, 1<<20))
		}
		n.Wake(ad[0])
		if !receiveAll(n, ep[1], 4) {
			t.Fatalf("on_reorder=%v: transfer did not complete", onReorder)
		}
		s, r := ep[0].Stats(), ep[1].Stats()
		if retx := s.RetxSack + s.RetxTimeout + s.RetxNack; retx != 0 && !onReorder {
			t.Errorf("on_reorder=%v: %d retransmissions with reordering shallower than the threshold", onReorder, retx)
		}
		acks[onReorder] = r.AcksSent
		t.Logf("on_reorder=%v: %d data, %d ACKs (%.3f per data packet), held back %d", onReorder, s.DataSent, r.AcksSent, float64(r.AcksSent)/float64(s.DataSent), n.Stats().Reordered)
	}
	if acks[false]*2 > acks[true] {
		t.Fatalf("ACKs: %d without on_reorder, %d with: want under half", acks[false], acks[true])
	}
}
