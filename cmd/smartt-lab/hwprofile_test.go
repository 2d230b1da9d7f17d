package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/cmd/internal/cli"
	"github.com/smartt-transport/smartt/transport"
)

func TestHWProfileReport(t *testing.T) {
	var out bytes.Buffer
	if err := runHWProfile([]string{"report", "-n", "1000"}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, name := range append(transport.CCNames(), transport.LBNames()...) {
		if !strings.Contains(s, " "+name+" ") {
			t.Errorf("report lacks %q:\n%s", name, s)
		}
	}
	for _, want := range []string{"cx6dx", "fpga-reps", "fits", "ns/decision"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	// -md: the static columns only, one row per algorithm, no timing.
	out.Reset()
	if err := runHWProfile([]string{"report", "-md"}, &out); err != nil {
		t.Fatal(err)
	}
	md := out.String()
	if n := strings.Count(md, "\n"); n != 2+len(transport.CCNames())+len(transport.LBNames()) || strings.Contains(md, "ns/decision") {
		t.Errorf("-md: %d lines:\n%s", n, md)
	}
	for _, name := range append(transport.CCNames(), transport.LBNames()...) {
		if !strings.Contains(md, "| "+name+" |") {
			t.Errorf("-md lacks %q:\n%s", name, md)
		}
	}
	if err := runHWProfile([]string{"nosuch"}, &out); err == nil || !cli.IsUsageError(err) {
		t.Errorf("unknown subcommand: %v", err)
	}
	if err := runHWProfile([]string{"report", "-n", "0"}, &out); err == nil || !strings.Contains(err.Error(), "-n") {
		t.Errorf("bad -n: %v", err)
	}
}
