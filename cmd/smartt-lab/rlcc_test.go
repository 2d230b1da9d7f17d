package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRLCCCommands: train writes a policy, curve and checkpoint from a tiny run, distill
// turns that policy into a NIC-sized model, table and fig3 print their tables, and bad
// flags are refused naming the flag.
func TestRLCCCommands(t *testing.T) {
	dir := t.TempDir()
	var out, prog bytes.Buffer
	err := runRLCC([]string{"train", "-iterations", "2", "-max-flows", "4", "-episode", "1ms", "-rollout", "32",
		"-horizon", "4", "-checkpoint-every", "1", "-out", dir}, &out, &prog)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"policy.json", "curve.csv", "curve.png", "checkpoint_0001.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("train did not write %s: %v", f, err)
		}
	}
	if !strings.Contains(prog.String(), "mean reward") || !strings.Contains(out.String(), "trained 2 episodes") {
		t.Errorf("progress %q, output %q", prog.String(), out.String())
	}
	model := filepath.Join(dir, "model.json")
	prog.Reset()
	if err := runRLCC([]string{"distill", "-q", "-policy", filepath.Join(dir, "policy.json"), "-episodes", "4", "-hold-out", "2",
		"-max-flows", "4", "-episode", "1ms", "-per-episode", "300", "-o", model}, &out, &prog); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(prog.String(), "held-out samples, RMSE") || !strings.Contains(prog.String(), "145 ops") {
		t.Errorf("distill report: %q", prog.String())
	}
	out.Reset()
	if err := runRLCC([]string{"table"}, &out, &prog); err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "increasing down the columns (as Table VI): true true true") != 2 ||
		!strings.Contains(out.String(), "increasing down the columns (as Table VI, steps within the fit error 0.03): true true true") {
		t.Errorf("embedded network, trees and the paper's table should all be ordered:\n%s", out.String())
	}
	out.Reset()
	if err := runRLCC([]string{"fig3", "-q", "-flows", "4", "-seeds", "1", "-warm", "1ms", "-measure", "1ms", "-policies", "trees", "-model", model}, &out, &prog); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "| 4 | trees |") {
		t.Errorf("fig3 table: %s", out.String())
	}
	out.Reset()
	if err := runRLCC([]string{"fig4", "-q", "-flows", "4", "-seeds", "1", "-targets", "0.1", "-betas", "1.5,2", "-model", model}, &out, &prog); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "| 0.1 | 1.5 | 4 |") || !strings.Contains(out.String(), "| 0.064 | 2 | 4 |") || strings.Contains(out.String(), "| 0.064 | 1.5 |") {
		t.Errorf("fig4 table: %s", out.String())
	}
	out.Reset()
	if err := runRLCC([]string{"compare", "-q", "-flows", "4", "-seeds", "1", "-warm", "1ms", "-measure", "1ms", "-ccs", "rlcc,smartt"}, &out, &prog); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "| 4 | rlcc |") || !strings.Contains(out.String(), "| 4 | smartt |") {
		t.Errorf("compare table: %s", out.String())
	}
	out.Reset()
	if err := runRLCC([]string{"longshort", "-q", "-short", "4", "-burst", "1ms", "-end", "2ms", "-seeds", "1", "-ccs", "rlcc"}, &out, &prog); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "| rlcc | ") || !strings.Contains(out.String(), "1 long, 4 short") || !strings.Contains(out.String(), "| 4 (4..4) |") {
		t.Errorf("longshort table: %s", out.String())
	}
	out.Reset()
	if err := runRLCC([]string{"table1", "-rounds", "2", "-batch", "2ms"}, &out, &prog); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| LSTM: FC 32-16, LSTM 16, FC 1 (seeded weights) | 2640 | 5586 flops | 2753 | 256 |",
		"145 integer ops", "| LSTM | x38.5 (5586 flops / 145 ops; x18.2 in multiply-adds) |", "x500 (450 / 0.9)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table1 lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := runRLCC([]string{"fig3", "-q", "-flows", "4,16", "-seeds", "1", "-warm", "1ms", "-measure", "1ms", "-policies", "trees,swift"}, &out, &prog); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "| 16 | swift |") || !strings.Contains(out.String(), "Least-squares fit") || !strings.Contains(out.String(), "| swift | ") {
		t.Errorf("fig3 with swift and its fit: %s", out.String())
	}
	out.Reset()
	if err := runRLCC([]string{"tables", "-q", "-seeds", "1", "-warm", "0s", "-measure", "1ms", "-m2o", "4", "-tree-m2o", "2", "-a2a", "64",
		"-longshort", "1/2", "-ccs", "rlcc,swift"}, &out, &prog); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<!-- results:rlcc-fig6 -->", "| 2 | rlcc |", "<!-- results:rlcc-fig7 -->", "| 64 | swift |",
		"<!-- results:rlcc-table4 -->", "| many-to-one 4 | all-to-all 64 | long-short 1/2 |", "<!-- results:rlcc-table5 -->", "| rlcc | "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("tables lacks %q:\n%s", want, out.String())
		}
	}
	for _, bad := range [][]string{
		{"tables", "-longshort", "1/0"},
		{"tables", "-measure", "10us"},
		{"table1", "-rounds", "0"},
		{"longshort", "-burst", "0s"},
		{"longshort", "-short", "0"},
		{"compare", "-ccs", "tcp-reno"},
		{"fig4", "-targets", "0"},
		{"fig4", "-flows", "2.5"},
		{"train", "-iterations", "0", "-out", dir},
		{"fig3", "-flows", "0"},
		{"fig3", "-policies", "lstm"},
		{"fig3", "-beta", "-1"},
		{"nonsense"},
	} {
		if err := runRLCC(bad, &out, &prog); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestRLCCLSTMAndFig8Commands: lstm trains, distils and compares a tiny LSTM teacher and
// writes its files; fig8 prints the series and the bring-up table; bad flags are refused.
func TestRLCCLSTMAndFig8Commands(t *testing.T) {
	dir := t.TempDir()
	var out, prog bytes.Buffer
	if err := runRLCC([]string{"lstm", "-q", "-iterations", "2", "-max-flows", "4", "-episode", "1ms", "-a2a-every", "0",
		"-distill-episodes", "5", "-flows", "4", "-seeds", "1", "-warm", "1ms", "-measure", "1ms", "-out", dir}, &out, &prog); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"lstm.json", "model.json", "curve.csv", "curve.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("lstm did not write %s: %v", f, err)
		}
	}
	for _, want := range []string{"| 0-1 | ", "LSTM 2640 multiply-adds, 5586 floating-point operations", "| LSTM | ", "| MLP (embedded policy) | ", "| 4 | lstm | ", "| 4 | trees | "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lstm output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := runRLCC([]string{"table1", "-rounds", "1", "-batch", "1ms", "-lstm", filepath.Join(dir, "lstm.json")}, &out, &prog); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "LSTM 16, FC 1 (trained)") {
		t.Errorf("table1 with a trained LSTM:\n%s", out.String())
	}
	out.Reset()
	if err := runRLCC([]string{"fig8", "-q", "-flows", "128", "-end", "600us", "-bin", "50us", "-print", "200us", "-bring-up", "200us", "-ccs", "rlcc,swift"}, &out, &prog); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| from (us) | rlcc goodput | RTT | lost | swift goodput |", "| 0 | ", "| 400 | ", "Bring-up here: the first 200 us", "| swift | "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("fig8 output lacks %q:\n%s", want, out.String())
		}
	}
	for _, bad := range [][]string{
		{"lstm", "-bptt", "17"},
		{"lstm", "-max-a2a", "1"},
		{"table1", "-lstm", filepath.Join(dir, "model.json")},
		{"fig8", "-flows", "100"},
		{"fig8", "-print", "150us"},
		{"fig8", "-bring-up", "10ms"},
		{"fig8", "-ccs", "tcp-reno"},
	} {
		if err := runRLCC(bad, &out, &prog); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
