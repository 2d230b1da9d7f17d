package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const ailbScen = `name: ailb-cli
topology: {kind: fattree3, hosts: 16, radix: 4, link_rate: 100Gbit, link_latency: 1us,
  queue: {bytes: 32768, trimmed_priority: true}}
transport: {cc: fixed_rate, fixed_rate: {coefficient: 1, fair_share_flows: 1}, lb: ops, max_retransmits: 255, reorder_threshold: 256, psn_window: 1024}
workload: {kind: permutation, size: 256KiB}
`

// The study runner: one table per metric and scenario, rows the -x values and columns the
// variants (built in and defined on the command line), each cell median (min..max) over
// the seeds, and one PNG per table; a variant it does not know is refused, naming the
// syntax for defining one.
func TestSimAILB(t *testing.T) {
	dir := t.TempDir()
	scen := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(scen, []byte(ailbScen), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	args := []string{"-scenarios", scen, "-variants", "sack,rts,big=topology.queue.bytes=409600;topology.queue.trim=false",
		"-x", "transport.fixed_rate.coefficient=0.5,1", "-seeds", "2", "-j", "2", "-signal", "-out", dir, "-prefix", "f_"}
	if err := runAILB(args, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	s := out.String()
	for _, want := range []string{
		"s: collective completion time / ideal, median (min..max) over 2 seeds:",
		"| transport.fixed_rate.coefficient | sack | rts | big |",
		"s: loss rate, %", "s: mean loss-signal delay, us",
	} {
		if !strings.Contains(s, want) {
			t.Fatalf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Count(s, "\n| 0.5 | ") != 3 || strings.Count(s, "\n| 1 | ") != 3 || strings.Contains(s, "unfinished") {
		t.Fatalf("want rows 0.5 and 1 in each of 3 tables, every run finished:\n%s", s)
	}
	if strings.Count(errb.String(), "] ") != 12 {
		t.Fatalf("want 12 runs reported:\n%s", errb.String())
	}
	for _, f := range []string{"f_s_cct.png", "f_s_loss.png", "f_s_signal.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	err := runAILB([]string{"-scenarios", scen, "-variants", "ecmp,dupack"}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "NAME=FIELD=VALUE") {
		t.Fatalf("unknown variant: %v", err)
	}
}
