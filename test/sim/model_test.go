package sim

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/reps"
	"github.com/smartt-transport/smartt/transport"
)

// TestControlWireBytes: with control_wire_bytes 64 every ACK is serialised as 64 bytes
// (htsim's figure) instead of its 100-byte datagram, so on a 1 Gbit/s single-switch path
// the last ACK arrives 2 x (800 - 512) ns earlier, and the ideal follows; values beyond
// the limits are refused.
func TestControlWireBytes(t *testing.T) {
	mk := func(ctl int) *Result {
		sc := scenario(TopologyConfig{Kind: "single", Hosts: 2, LinkRate: 1e9, LinkLatency: 500, SwitchLatency: 500},
			WorkloadConfig{Kind: "incast", Senders: 1, Receiver: 0, Size: 64 << 10})
		sc.Transport.InitialWindow = 1 << 20
		sc.ControlWireBytes = ctl
		return run(t, sc)
	}
	base, small := mk(0), mk(64)
	if d := base.PerFlow[0].FCT - small.PerFlow[0].FCT; d < 574 || d > 578 {
		t.Fatalf("64-byte ACKs saved %d ns of the FCT, want 2 x 288", d)
	}
	if small.Ratio < 0.999 || small.Ratio > 1.001 {
		t.Fatalf("completion / ideal = %.4f with 64-byte ACKs: the ideal must count them too", small.Ratio)
	}
	if base.Hops != small.Hops || base.PacketsSent != small.PacketsSent {
		t.Fatalf("accounting changed the packets: %d/%d hops, %d/%d sent", base.Hops, small.Hops, base.PacketsSent, small.PacketsSent)
	}
	for _, c := range []struct {
		v  int
		ok bool
	}{{1, true}, {MaxControlWireBytes, true}, {-1, false}, {MaxControlWireBytes + 1, false}} {
		sc := scenario(TopologyConfig{Kind: "single", Hosts: 2, LinkRate: 1e9, LinkLatency: 500, SwitchLatency: 500},
			WorkloadConfig{Kind: "incast", Senders: 1, Receiver: 0, Size: 4096})
		sc.ControlWireBytes = c.v
		_, err := New(sc)
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), "control_wire_bytes")) {
			t.Errorf("control_wire_bytes = %d: %v, want ok=%v", c.v, err, c.ok)
		}
	}
}

// TestEvictFabric: an overloaded incast with queue.evict 0.5 (htsim's full queue) still
// trims, completes every flow and repeats for a seed, but differs from the default (the
// arriving packet always cut); with drop-tail and evict 1 every packet dropped from a
// queue's head (or, evict_newest, its tail) is released and recovered.
func TestEvictFabric(t *testing.T) {
	newest := false
	mk := func(evict float64, trim bool) *Result {
		sc := scenario(TopologyConfig{Kind: "single", Hosts: 9, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 500},
			WorkloadConfig{Kind: "incast", Senders: 8, Receiver: 0, Size: 256 << 10})
		sc.Transport.LB = "ops"
		sc.Transport.InitialWindow = 64 << 10
		sc.Transport.MaxRetransmits = 255
		sc.Topology.Queue.Evict, sc.Topology.Queue.EvictNewest = evict, newest
		sc.Topology.Queue.Trim = &trim
		return run(t, sc)
	}
	def, ev, ev2 := mk(0, true), mk(0.5, true), mk(0.5, true)
	if ev.Completed != ev.Flows || ev.Trims == 0 || def.Trims == 0 {
		t.Fatalf("evict 0.5: %d/%d flows, %d trims (default %d)", ev.Completed, ev.Flows, ev.Trims, def.Trims)
	}
	if ev.Hash() != ev2.Hash() {
		t.Fatal("evict 0.5: two runs of one seed differ")
	}
	if ev.Hash() == def.Hash() {
		t.Fatal("evict 0.5 gave the default's output: the option had no effect")
	}
	for _, newest = range []bool{false, true} {
		dt := mk(1, false)
		if dt.Completed != dt.Flows || dt.Drops == 0 {
			t.Fatalf("drop-tail evict 1, evict_newest %v: %d/%d flows, %d drops", newest, dt.Completed, dt.Flows, dt.Drops)
		}
	}
	sc := scenario(TopologyConfig{Kind: "single", Hosts: 2, LinkRate: 1e9}, WorkloadConfig{Kind: "incast", Senders: 1, Size: 4096})
	sc.Topology.Queue.Evict = 1.5
	if _, err := New(sc); err == nil || !strings.Contains(err.Error(), "evict = 1.5") {
		t.Fatalf("evict 1.5: %v", err)
	}
}

// hopRecorder is a fixed window that records the hop count the engine gives it.
type hopRecorder struct {
	cc.Fixed
	hops *int
}

func (h *hopRecorder) SetHops(n int) { *h.hops = n }

// TestPerFlowBaseRTT: with per_flow_base_rtt every dialled connection is told how many
// switches its path crosses (1 under one ToR, 3 across the spines of a 2-tier fat tree)
// and smartt.base_rtt_per_hop holds each path length's base RTT; without it nothing is
// set and every engine has the longest path's base RTT.
func TestPerFlowBaseRTT(t *testing.T) {
	for _, perFlow := range []bool{false, true} {
		sc := scenario(TopologyConfig{Kind: "fattree2", Hosts: 16, Radix: 8, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 500},
			WorkloadConfig{Kind: "incast", Senders: 15, Receiver: 0, Size: 8192})
		sc.PerFlowBaseRTT = perFlow
		hops := make([]int, 16)
		for i := range hops {
			hops[i] = -1
		}
		sc.NewTransport = func(host int, cfg *transport.Config, hk *transport.Hooks) {
			if perFlow && len(cfg.SMaRTT.BaseRTTPerHop) != 4 {
				t.Errorf("base_rtt_per_hop has %d entries, want 4 (0..3 switches)", len(cfg.SMaRTT.BaseRTTPerHop))
			}
			hk.NewCC = func() cc.Controller { return &hopRecorder{Fixed: cc.Fixed{Bytes: 1 << 20}, hops: &hops[host]} }
		}
		s, err := New(sc)
		if err != nil {
			t.Fatal(err)
		}
		if perFlow {
			per := s.hosts[0].ep.Config().SMaRTT.BaseRTTPerHop
			for h, d := range per {
				if int64(d) != s.baseRTT(h+1, sc.Transport.MTU) {
					t.Errorf("base_rtt_per_hop[%d] = %d, want the %d-link base RTT %d", h, d, h+1, s.baseRTT(h+1, sc.Transport.MTU))
				}
			}
			if int64(per[3]) != int64(s.hosts[0].ep.Config().BaseRTT) {
				t.Errorf("3 switches: %d, the fabric's longest-path base RTT %d", per[3], s.hosts[0].ep.Config().BaseRTT)
			}
		}
		r := s.Run()
		if r.Completed != r.Flows {
			t.Fatalf("%d/%d flows", r.Completed, r.Flows)
		}
		for h := 1; h < 16; h++ {
			want := -1
			if perFlow {
				want = 3
				if h < 4 { // under the receiver's ToR
					want = 1
				}
			}
			if hops[h] != want {
				t.Errorf("per_flow_base_rtt=%v: host %d's connection got %d hops, want %d", perFlow, h, hops[h], want)
			}
		}
	}
}

// evCounter passes a balancer's feedback through, counting the unmarked EVs it is given.
type evCounter struct {
	reps.Balancer
	clean *int
}

func (b *evCounter) OnAck(now int64, ev uint16, ce bool, rtt int64) {
	if !ce {
		*b.clean++
	}
	b.Balancer.OnAck(now, ev, ce, rtt)
}

func (b *evCounter) OnCoalescedAck(now int64, trigger uint16, ce bool, clean []uint16, rtt int64) {
	*b.clean += len(clean)
	b.Balancer.(reps.CoalescedAcker).OnCoalescedAck(now, trigger, ce, clean, rtt)
}

// TestHTSimAckPolicyCleanEVs: under htsim's ACK policy (an ACK per 16 KiB, on CE, no
// ACK forced by reordering or a filled hole) with clean-EV lists, REPS is still handed
// nearly every unmarked EV (>= 90 % of the unmarked data packets received) while the
// receivers send at most a third as many control packets as data packets; without the
// lists it would see about one EV per ACK.
func TestHTSimAckPolicyCleanEVs(t *testing.T) {
	for _, lists := range []bool{true, false} {
		sc := scenario(TopologyConfig{Kind: "fattree2", Hosts: 32, Radix: 8, LinkRate: 400e9, LinkLatency: 500, SwitchLatency: 500},
			WorkloadConfig{Kind: "permutation", Size: 512 << 10})
		sc.Transport.CC, sc.Transport.LB = "smartt", "reps"
		sc.Transport.ReorderThreshold = 256
		a := &sc.Transport.Ack
		a.Every, a.EveryBytes, a.OnReorder, a.OnCE, a.DeferFill, a.CleanEVs = 64, 16384, false, true, true, lists
		sc.Transport.REPS.CleanEVs = lists
		clean := 0
		sc.NewTransport = func(host int, cfg *transport.Config, hk *transport.Hooks) {
			env := reps.Env{EVS: cfg.EVS, BDPPackets: int(cfg.Network().BDP()/int64(cfg.MTU)) + 1, BaseRTT: int64(cfg.BaseRTT), Trimming: cfg.Trimming}
			rc := cfg.REPS
			hk.NewBalancer = func(rng *rand.Rand) reps.Balancer { return &evCounter{reps.NewREPS(rc, env, rng), &clean} }
		}
		s, err := New(sc)
		if err != nil {
			t.Fatal(err)
		}
		r := s.Run()
		if r.Completed != r.Flows {
			t.Fatalf("clean_evs=%v: %d/%d flows", lists, r.Completed, r.Flows)
		}
		var unmarked, acks uint64
		for i := range s.hosts {
			st := s.hosts[i].ep.Stats()
			unmarked += st.DataRecv - st.CERecv
			acks += st.AcksSent
		}
		seen := float64(clean) / float64(unmarked)
		ctl := float64(r.PacketsSent-r.DataSent) / float64(r.DataSent)
		t.Logf("clean_evs=%v: balancer given %d clean EVs for %d unmarked data packets (%.3f); %d ACKs, control/data %.3f, completion/ideal %.3f",
			lists, clean, unmarked, seen, acks, ctl, r.Ratio)
		if ctl > 0.34 {
			t.Errorf("clean_evs=%v: %.3f control packets per data packet, want <= 1/3 with an ACK per 16 KiB", lists, ctl)
		}
		if lists && seen < 0.9 {
			t.Errorf("with clean-EV lists REPS saw %.3f of the unmarked EVs, want >= 0.9", seen)
		}
		if !lists && seen > 0.5 {
			t.Errorf("without clean-EV lists REPS saw %.3f of the unmarked EVs: expected about one per ACK", seen)
		}
	}
}
