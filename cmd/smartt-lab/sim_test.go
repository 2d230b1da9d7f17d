package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimRun(t *testing.T) {
	dir := t.TempDir()
	scen := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(scen, []byte(`name: cli
topology: {kind: fattree2, hosts: 16, radix: 8, link_rate: 100Gbit, link_latency: 500ns, switch_latency: 500ns}
transport: {max_retransmits: 255}
workload: {kind: permutation, size: 128KiB}
output: {sample_interval: 1us, sample_ports: up}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	outDir := filepath.Join(dir, "out")
	if err := runSim([]string{"run", "-progress=false", "-lb", "ops", "-plots", "svg", "-out", outDir, scen}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), "flows 16/16 done") || !strings.Contains(out.String(), "lb=ops") {
		t.Fatalf("output:\n%s", out.String())
	}
	for _, f := range []string{"result.json", "flows.csv", "queues.csv", "fct_cdf.svg", "queues.svg"} {
		if st, err := os.Stat(filepath.Join(outDir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s missing: %v", f, err)
		}
	}
	// One run per balancer, a comparison table and one CDF of all.
	out.Reset()
	cmpDir := filepath.Join(dir, "cmp")
	if err := runSim([]string{"run", "-progress=false", "-compare", "ecmp,ops", "-plots", "png", "-out", cmpDir, scen}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), "completion") || strings.Count(out.String(), "flows 16/16 done") != 2 {
		t.Fatalf("compare output:\n%s", out.String())
	}
	for _, f := range []string{"result_ecmp.json", "result_ops.json", "flows_ops.csv", "fct_cdf.png"} {
		if _, err := os.Stat(filepath.Join(cmpDir, f)); err != nil {
			t.Fatalf("%s missing: %v", f, err)
		}
	}
	// Bad input names the field.
	if err := os.WriteFile(scen, []byte("topology: {kind: ring, hosts: 4}\nworkload: {kind: incast, size: 1KiB}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := runSim([]string{"run", "-progress=false", scen}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "topology.kind") {
		t.Fatalf("error %v", err)
	}
	if err := runSim([]string{"run"}, &out, &errb); err == nil {
		t.Fatal("no scenario accepted")
	}
}
