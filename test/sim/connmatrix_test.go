package sim

import (
	"fmt"
	"strings"
	"testing"
)

// TestParseConnectionMatrix: htsim's format reads as written (start in whole microseconds);
// bad input gets an error naming its line, at and beyond every limit.
func TestParseConnectionMatrix(t *testing.T) {
	const ok = "# comment\n\nNodes 4\nConnections 2\nTriggers 0\nFailures 0\n0->3 start 1.9 size 4096\n2->1 id 7 prio 3 size 1 start 0\n"
	flows, err := ParseConnectionMatrix(strings.NewReader(ok), 4, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := []FlowSpec{{Src: 0, Dst: 3, Start: 1000, Size: 4096}, {Src: 2, Dst: 1, Start: 0, Size: 1}}
	if fmt.Sprint(flows) != fmt.Sprint(want) {
		t.Fatalf("flows %v, want %v", flows, want)
	}
	hdr := "Nodes 4\nConnections 1\n"
	for _, tc := range []struct{ name, in, want string }{
		{"node id at Nodes", hdr + "0->4 start 0 size 1\n", "line 3: destination \"4\": want a node id in 0..3"},
		{"negative node id", hdr + "-1->2 start 0 size 1\n", "line 3: source"},
		{"Nodes beyond the topology", "Nodes 5\n", "line 1: Nodes 5: must be in 2..4"},
		{"Nodes below 2", "Nodes 1\n", "line 1: Nodes 1"},
		{"negative size", hdr + "0->1 start 0 size -5\n", "line 3: size \"-5\""},
		{"zero size", hdr + "0->1 start 0 size 0\n", "line 3: size \"0\""},
		{"size beyond max_message", hdr + "0->1 start 0 size 1048577\n", "line 3: size \"1048577\": want bytes in 1..1048576"},
		{"negative start", hdr + "0->1 start -1 size 1\n", "line 3: start \"-1\""},
		{"NaN start", hdr + "0->1 start NaN size 1\n", "line 3: start \"NaN\""},
		{"self", hdr + "2->2 start 0 size 1\n", "line 3: 2->2: a host cannot send to itself"},
		{"missing size", hdr + "0->1 start 0\n", "line 3: 0->1 needs start and size"},
		{"keyword without value", hdr + "0->1 start 0 size\n", "line 3: \"size\" has no value"},
		{"unknown keyword", hdr + "0->1 start 0 size 1 paths 2\n", "line 3: unknown keyword \"paths\""},
		{"trigger", hdr + "0->1 trigger 1 size 1\n", "line 3: trigger: triggers are not supported"},
		{"more than declared", hdr + "0->1 start 0 size 1\n1->0 start 0 size 1\n", "line 4: more connections than the 1 declared"},
		{"fewer than declared", "Nodes 4\nConnections 3\n0->1 start 0 size 1\n", "1 connections listed, 3 declared"},
		{"no headers", "0->1 start 0 size 1\n", "line 1: connection before the Nodes and Connections headers"},
		{"missing headers", "# nothing\n", "missing Nodes or Connections header"},
		{"unknown header", "Hosts 4\n", "line 1: unknown header \"Hosts\""},
		{"header after a connection", hdr + "0->1 start 0 size 1\nNodes 4\n", "line 4: header Nodes after the first connection"},
		{"failures", "Nodes 4\nFailures 1\n", "line 2: Failures 1: triggers and failures are not supported"},
		{"Connections beyond the limit", fmt.Sprintf("Nodes 4\nConnections %d\n", MaxMatrixFlows+1), "line 2: Connections 1048577: at most 1048576"},
		{"Connections at the limit", fmt.Sprintf("Nodes 4\nConnections %d\n0->1 start 0 size 1\n", MaxMatrixFlows), "1 connections listed, 1048576 declared"},
		{"line too long", hdr + "0->1 start 0 size 1 " + strings.Repeat(" ", 5000) + "\n", "line 3: bufio.Scanner: token too long"},
	} {
		_, err := ParseConnectionMatrix(strings.NewReader(tc.in), 4, 1<<20)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
	// Lines: exactly MaxMatrixLines is fine, one more is refused.
	body := hdr + "0->1 start 0 size 1\n"
	atLimit := body + strings.Repeat("#\n", MaxMatrixLines-3)
	if _, err := ParseConnectionMatrix(strings.NewReader(atLimit), 4, 1<<20); err != nil {
		t.Errorf("%d lines: %v", MaxMatrixLines, err)
	}
	if _, err := ParseConnectionMatrix(strings.NewReader(atLimit+"#\n"), 4, 1<<20); err == nil ||
		!strings.Contains(err.Error(), fmt.Sprintf("line %d: more than %d lines", MaxMatrixLines+1, MaxMatrixLines)) {
		t.Errorf("%d lines: %v", MaxMatrixLines+1, err)
	}
}

// TestListedFlows: a connection matrix file and the same flows listed inline run the same
// flows at the listed times (the 3:1 incast under one ToR and a later cross-fabric flow),
// with the same output; inline flows are checked like the file's.
func TestListedFlows(t *testing.T) {
	topo := TopologyConfig{Kind: "fattree2", Hosts: 16, Radix: 8, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 500}
	sc := scenario(topo, WorkloadConfig{Kind: "connection_matrix", File: "incast_tor0.cm"})
	sc.Dir = "testdata"
	fromFile := run(t, sc)
	inline := []FlowSpec{{1, 0, 0, 65536}, {2, 0, 0, 65536}, {3, 0, 0, 65536}, {5, 12, 20_000, 131072}}
	fromList := run(t, scenario(topo, WorkloadConfig{Kind: "flows", Flows: inline}))
	fromList.Workload = fromFile.Workload // the kind's name is all that may differ
	if fromFile.Completed != 4 || fromFile.Hash() != fromList.Hash() {
		t.Fatalf("file: %d/4 flows, hash %s; inline: hash %s", fromFile.Completed, fromFile.Hash(), fromList.Hash())
	}
	for i, f := range fromFile.PerFlow {
		if f.Src != inline[i].Src || f.Dst != inline[i].Dst || f.Start != int64(inline[i].Start) || f.Size != int64(inline[i].Size) {
			t.Errorf("flow %d: %+v, want %+v", i, f, inline[i])
		}
	}
	for _, tc := range []struct {
		flows []FlowSpec
		want  string
	}{
		{nil, "workload.flows: 0 flows"},
		{[]FlowSpec{{0, 16, 0, 1}}, "workload.flows[0]: src 0, dst 16"},
		{[]FlowSpec{{0, 1, 0, 1}, {3, 3, 0, 1}}, "workload.flows[1]: src = dst = 3"},
		{[]FlowSpec{{0, 1, 0, -1}}, "workload.flows[0]: size -1"},
		{[]FlowSpec{{0, 1, -5, 1}}, "workload.flows[0]: start"},
	} {
		if _, err := New(scenario(topo, WorkloadConfig{Kind: "flows", Flows: tc.flows})); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.flows, err, tc.want)
		}
	}
	// The shipped matrix (a 7:1 incast inside ToR 0, later flows across the spines): the
	// ideal must stay a lower bound although its flows differ in path length (with the
	// slowest flow's tail added to the busiest host, completion / ideal was 0.978).
	msc, err := LoadScenario("scenarios/matrix_128.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if r := run(t, msc); r.Completed != 15 || r.Ratio < 1 {
		t.Fatalf("matrix_128: %d/15 flows, completion / ideal %.3f", r.Completed, r.Ratio)
	}
	// Inline flows in a scenario file.
	ysc, err := ParseScenario([]byte("topology: {kind: single, hosts: 4}\nworkload:\n  kind: flows\n  flows:\n  - {src: 1, dst: 0, start: 2us, size: 4KiB}\n  - {src: 3, dst: 2, start: 0s, size: 100}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(ysc.Workload.Flows); got != "[{1 0 2us 4096} {3 2 0s 100}]" {
		t.Fatalf("decoded flows %s", got)
	}
	sc = scenario(topo, WorkloadConfig{Kind: "connection_matrix", File: "missing.cm"})
	sc.Dir = "testdata"
	if _, err := New(sc); err == nil || !strings.Contains(err.Error(), "workload.file") {
		t.Errorf("missing file: %v", err)
	}
}
