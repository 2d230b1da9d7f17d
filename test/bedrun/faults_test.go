package bedrun_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/smartt-transport/smartt/test/bedrun"
	"github.com/smartt-transport/smartt/test/sim"
)

// TestRunFaults: the scenario's degrade, flaky and down-until failures on an emulated
// leaf-spine (2 leaves × 2 spines, 4 hosts, tornado, OPS). The degraded uplink holds a
// standing queue (queue samples, the simulator's format), the flaky link loses frames (and every flow
// still completes intact), and the link that was down carries no frames while down and
// carries them again after it came back (its pcap).
func TestRunFaults(t *testing.T) {
	sc := scenario(t, `
name: faults
seed: 4
topology: {kind: leafspine, hosts: 4, leaves: 2, spines: 2, link_rate: 200Mbit}
transport: {cc: smartt, lb: ops, base_rtt: 2ms}
workload: {kind: tornado, size: 3MiB}
failures:
  - {kind: degrade, a: tor0, b: spine0, at: 0s, rate: 40Mbit}
  - {kind: flaky, a: tor1, b: spine1, at: 0s, until: 400ms, gap: 3ms, burst: 1ms}
  - {kind: down, a: tor0, b: spine1, at: 100ms, until: 200ms}
routing_convergence: 20ms
output: {sample_interval: 1ms, sample_ports: up}
`)
	dir := t.TempDir()
	rep, err := bedrun.Execute(sc, bedrun.Options{Name: name(t), Timeout: 40 * time.Second, Pcap: dir, PcapLinks: []string{"leaf0-spine1"}})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Result
	t.Logf("%d/%d flows, completion %v; flaky drops %d, link drops %d, refused %v; marks %d, trims %d; samples late by up to %v",
		r.Completed, r.Flows, time.Duration(r.Completion), r.FlakyDrops, r.LinkDrops, rep.Refused, r.Marks, r.Trims, rep.SampleLate)
	if r.Completed != r.Flows || r.Failed != 0 {
		t.Fatalf("%d of %d flows completed, %d failed", r.Completed, r.Flows, r.Failed)
	}
	for i, f := range r.PerFlow {
		if f.RxTime < 0 {
			t.Errorf("flow %d never arrived intact", i)
		}
	}
	var lost, lostElsewhere uint64
	for _, p := range rep.Ports {
		if p.Link == "leaf1-spine1" {
			lost += p.Lost
		} else {
			lostElsewhere += p.Lost
		}
	}
	if lost == 0 || lostElsewhere != 0 || r.FlakyDrops != lost {
		t.Errorf("flaky: %d frames lost on leaf1-spine1, %d elsewhere, result says %d", lost, lostElsewhere, r.FlakyDrops)
	}
	if _, ok := rep.Refused["leaf0-spine1"]; !ok {
		t.Errorf("no refused count for the link that went down: %v", rep.Refused)
	}

	// Queue samples: the four leaf uplinks, named as in the simulator.
	peak, mean := map[string]int32{}, map[string]int64{}
	for _, q := range r.Samples {
		peak[q.Port] = slices.Max(q.Bytes)
		for _, b := range q.Bytes {
			mean[q.Port] += int64(b)
		}
		mean[q.Port] /= int64(max(1, len(q.Bytes)))
		if len(q.Times) < 100 || q.Times[1] != int64(time.Millisecond) {
			t.Errorf("%s: %d samples, times %v...", q.Port, len(q.Times), q.Times[:min(2, len(q.Times))])
		}
	}
	t.Logf("data queue per uplink: peak %v, mean %v", peak, mean)
	if len(peak) != 4 {
		t.Fatalf("sampled ports %v; want tor0->spine0, tor0->spine1, tor1->spine0, tor1->spine1", peak)
	}
	for port, m := range mean {
		if port != "tor0->spine0" && mean["tor0->spine0"] < 4*m {
			t.Errorf("degraded tor0->spine0 held %d B on average, %s %d B; want 4 times as much", mean["tor0->spine0"], port, m)
		}
	}
	if p := peak["tor0->spine0"]; p < 2*9000 {
		t.Errorf("degraded tor0->spine0 peaked at %d B; want >= 2 frames", p)
	}
	var csv strings.Builder
	if err := r.WriteSamplesCSV(&csv); err != nil || !strings.HasPrefix(csv.String(), "time_ns,tor0->spine0,") {
		t.Errorf("queues.csv starts %.60q (%v)", csv.String(), err)
	}

	// The pcap of leaf0-spine1: frames before 100 ms, none while down (100–200 ms; sends
	// are refused and not captured), frames again once up and routed (from 220 ms).
	if len(rep.Pcaps) != 1 || rep.Pcaps[0].Link != "leaf0-spine1" || rep.Pcaps[0].Frames == 0 {
		t.Fatalf("pcaps: %+v", rep.Pcaps)
	}
	f, err := os.Open(filepath.Join(dir, "leaf0-spine1.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pr, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var before, during, after int
	first := time.Duration(-1) // the first frame on the link
	// The failure is applied by the same loop that takes queue samples: on a loaded host
	// it lands as late as they do, so frames that close after 100 ms still passed.
	downFrom := 105*time.Millisecond + rep.SampleLate
	for {
		_, ci, err := pr.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		at := ci.Timestamp.Sub(rep.Start)
		if first < 0 {
			first = at
		}
		switch {
		case at < 100*time.Millisecond:
			before++
		case at > downFrom && at < 200*time.Millisecond:
			during++
		case at >= 220*time.Millisecond:
			after++
		}
	}
	t.Logf("leaf0-spine1 frames: %d before the failure, %d while down, %d after (the first at %v)", before, during, after, first)
	// On a loaded host the daemons may not have sent on this link before the failure at
	// 100 ms (the run's clock starts before they are up): then there is no "before".
	wantBefore := first >= 0 && first < 90*time.Millisecond
	if (wantBefore && before == 0) || during != 0 || after == 0 {
		t.Errorf("leaf0-spine1 frames: %d before, %d while down, %d after; want some, none, some", before, during, after)
	}
}

// TestRunControl: faults sent to a running run over its control socket (what
// smartt-lab testbed fail does) act on it: a degraded host port slows the incast down, a
// flaky one loses frames; a fault on a link that does not exist is refused.
func TestRunControl(t *testing.T) {
	sc := scenario(t, `
name: control
topology: {kind: single, hosts: 3, link_rate: 200Mbit}
transport: {cc: smartt, lb: ops}
workload: {kind: incast, size: 1MiB, senders: 2, receiver: 2}
`)
	ctl := filepath.Join(t.TempDir(), "ctl")
	answers := make(chan error, 3)
	go func() {
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
			if _, err := os.Stat(ctl); err == nil {
				break
			}
		}
		answers <- bedrun.Control(ctl, []string{"degrade", "40Mbit", "h2-sw0"})
		answers <- bedrun.Control(ctl, []string{"flaky", "5ms", "1ms", "sw0-h2"})
		answers <- bedrun.Control(ctl, []string{"down", "h9-sw0"})
	}()
	rep, err := bedrun.Execute(sc, bedrun.Options{Name: name(t), Timeout: 40 * time.Second, Control: ctl})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"", "", "no link"} {
		err := <-answers
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("command %d: %v; want %q", i, err, want)
		}
	}
	r := rep.Result
	t.Logf("completion %v (2 MiB into h2: 84 ms at 200 Mbit/s, 420 ms at 40); flaky drops %d", time.Duration(r.Completion), r.FlakyDrops)
	if r.Completed != 2 {
		t.Fatalf("%d of 2 flows completed", r.Completed)
	}
	if r.Completion < int64(300*time.Millisecond) {
		t.Errorf("completion %v: the degraded port (40 Mbit/s) should take about 420 ms", time.Duration(r.Completion))
	}
	if r.FlakyDrops == 0 {
		t.Error("the flaky port lost nothing")
	}
	if _, err := os.Stat(ctl); err == nil {
		t.Error("control socket left behind")
	}
}

// TestRunAllReduce: ring and butterfly all-reduce on 4 hosts of one switch. Every step's
// flows arrive intact, each starts only after its host received the previous step's
// message, and the collective takes at least its chain of steps.
func TestRunAllReduce(t *testing.T) {
	for _, kind := range []string{"ring_allreduce", "butterfly_allreduce"} {
		t.Run(kind, func(t *testing.T) {
			sc := scenario(t, `
name: `+kind+`
topology: {kind: single, hosts: 4, link_rate: 200Mbit}
transport: {cc: smartt, lb: ops}
workload: {kind: `+kind+`, size: 1MiB}
`)
			rep, err := bedrun.Execute(sc, bedrun.Options{Name: name(t), Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			r := rep.Result
			dsts, _, _ := sim.AllReduceSteps(kind, 4, 1<<20)
			t.Logf("%d flows in %d steps, completion %v, ideal %v, ratio %.2f", r.Flows, len(dsts), time.Duration(r.Completion), time.Duration(r.Ideal), r.Ratio)
			if r.Flows != 4*len(dsts) || r.Completed != r.Flows {
				t.Fatalf("%d of %d flows completed; want %d", r.Completed, r.Flows, 4*len(dsts))
			}
			for i, f := range r.PerFlow {
				if f.RxTime < 0 || f.Dst != dsts[f.Phase][f.Src] {
					t.Fatalf("flow %d (h%d→h%d, step %d): rx %d", i, f.Src, f.Dst, f.Phase, f.RxTime)
				}
				if f.Phase == 0 {
					continue
				}
				for _, p := range r.PerFlow { // what f's source received in the previous step
					if p.Dst == f.Src && p.Phase == f.Phase-1 && p.Start+p.RxTime > f.Start {
						t.Errorf("step %d flow h%d→h%d started at %v, before its input arrived at %v",
							f.Phase, f.Src, f.Dst, time.Duration(f.Start), time.Duration(p.Start+p.RxTime))
					}
				}
			}
			if r.Ratio < 1 || r.Ideal <= r.PerFlow[0].Ideal {
				t.Errorf("completion %v, ideal %v (one flow's %v): want the chain of steps as the bound, and above it",
					time.Duration(r.Completion), time.Duration(r.Ideal), time.Duration(r.PerFlow[0].Ideal))
			}
		})
	}
}
