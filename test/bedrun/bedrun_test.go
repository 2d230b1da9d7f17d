package bedrun_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/bedrun"
	"github.com/smartt-transport/smartt/test/netbed"
	"github.com/smartt-transport/smartt/test/sim"
)

// name returns a testbed name unique to this run; t.Cleanup removes whatever is left.
func name(t *testing.T) string {
	if os.Geteuid() != 0 {
		t.Skip("needs root (namespaces, AF_PACKET)")
	}
	n := fmt.Sprintf("br%08x", rand.Uint32())
	t.Cleanup(func() {
		if err := netbed.Remove(n); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return n
}

func scenario(t *testing.T, y string) *sim.Scenario {
	t.Helper()
	sc, err := sim.ParseScenario([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestEmulatedIncast: 4 hosts send 1 MiB each to a fifth through one emulated switch
// (switchport's model: 32 KiB data queue at 200 Mbit/s, RED, trimming). The switch must
// mark and trim, the receiver must NACK the trimmed packets and the senders hear the
// NACKs, SMaRTT's QuickAdapt must fire, and every message arrives intact (the runner
// compares every byte).
func TestEmulatedIncast(t *testing.T) {
	sc := scenario(t, `
name: incast4
seed: 3
topology: {kind: single, hosts: 5, link_rate: 200Mbit, queue: {bytes: 16384}}
transport: {cc: smartt}
workload: {kind: incast, size: 2MiB, senders: 4, receiver: 4}
`)
	t0 := time.Now()
	rep, err := bedrun.Execute(sc, bedrun.Options{Name: name(t), Timeout: 40 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Result
	var nacksRx uint64
	for _, h := range rep.Hosts {
		nacksRx += h.NacksRecv
	}
	t.Logf("%v: %d/%d flows, completion %v, FCT max %v; switch: %d marks, %d trims, %d drops; daemons: %d NACKs sent, %d received, %d NACK retx, %d CE echoed, %d QuickAdapts",
		time.Since(t0).Round(time.Millisecond), r.Completed, r.Flows, time.Duration(r.Completion), time.Duration(r.FCT.Max),
		r.Marks, r.Trims, r.Drops, r.NacksSent, nacksRx, r.RetxNack, r.CEEchoed, rep.Quick)
	if r.Completed != 4 || r.Failed != 0 {
		t.Fatalf("%d of 4 flows completed, %d failed", r.Completed, r.Failed)
	}
	for i, f := range r.PerFlow {
		if f.RxTime < 0 {
			t.Errorf("flow %d never arrived intact", i)
		}
	}
	if r.Marks == 0 || r.Trims == 0 {
		t.Errorf("switch marked %d and trimmed %d packets; want both > 0", r.Marks, r.Trims)
	}
	if r.NacksSent == 0 || nacksRx == 0 || r.RetxNack == 0 {
		t.Errorf("NACKs: %d sent, %d received, %d retransmissions; want all > 0", r.NacksSent, nacksRx, r.RetxNack)
	}
	if r.CEEchoed == 0 {
		t.Error("no CE mark was echoed to a sender")
	}
	if rep.Quick == 0 {
		t.Error("SMaRTT's QuickAdapt never fired")
	}
}

// failover runs 8 hosts on 2 leaves × 4 spines (200 Mbit/s links), every host sending
// 4 MiB to the host at the same place on the other leaf, and fails leaf0–spine1 30 ms in;
// routing does not converge during the run (an hour later), so every connection must get
// around the dead link by itself, ACKs included (they rotate over the EVs). REPS's freeze
// lasts 300 ms: about 100 of this testbed's 3 ms RTTs, as the default 1 ms is about 100 of
// a datacenter fabric's (a freeze shorter than an RTT would end, and explore again, before
// the first ACK of the EVs it froze on came back; now a freeze ends on time).
func failover(t *testing.T, lb string) *bedrun.Report {
	sc := scenario(t, `
name: failover-`+lb+`
seed: 5
topology: {kind: leafspine, hosts: 8, leaves: 2, spines: 4, link_rate: 200Mbit, queue: {bytes: 65536}}
transport: {cc: smartt, lb: `+lb+`, base_rtt: 3ms, reorder_threshold: 4, reps: {freeze_duration: 300ms}}
workload: {kind: tornado, size: 4MiB}
failures: [{kind: down, a: tor0, b: spine1, at: 30ms}]
routing_convergence: 1h
`)
	rep, err := bedrun.Execute(sc, bedrun.Options{Name: name(t), Timeout: 40 * time.Second})
	if err != nil {
		t.Fatalf("%s: %v", lb, err)
	}
	r := rep.Result
	t.Logf("%s: %d/%d flows, completion %v; %d frames sent into the dead link after the failure; retx: %d SACK, %d NACK, %d timeout; %d trims, %d freeze episodes",
		lb, r.Completed, r.Flows, time.Duration(r.Completion), rep.Refused["leaf0-spine1"], r.RetxSack, r.RetxNack, r.RetxTimeout, r.Trims, r.FreezeEpisodes)
	if r.Completed != r.Flows || r.Failed != 0 {
		t.Fatalf("%s: %d of %d flows completed, %d failed", lb, r.Completed, r.Flows, r.Failed)
	}
	return rep
}

// TestEmulatedSpineFailure: a spine link goes down mid-transfer on an emulated
// leaf-spine (the switches keep hashing into it, as before routing converges). Every
// transfer completes with REPS and with OPS, and REPS sends at least 10x fewer packets
// into the dead link than OPS after the failure (the switches' counters).
func TestEmulatedSpineFailure(t *testing.T) {
	reps := failover(t, "reps").Refused["leaf0-spine1"]
	ops := failover(t, "ops").Refused["leaf0-spine1"]
	if ops == 0 {
		t.Fatal("OPS sent nothing into the dead link: the failure happened after the transfer")
	}
	if reps*10 > ops {
		t.Fatalf("into the dead link: REPS %d, OPS %d frames; want REPS at most OPS/10", reps, ops)
	}
}
