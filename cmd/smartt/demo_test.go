package main

import (
	"strings"
	"testing"
)

func TestDemoDeliversEverything(t *testing.T) {
	out, err := execute("demo", "-inmem", "-messages", "8", "-max-size", "300000", "-loss", "0.05")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "8 of 8 messages delivered exactly once and intact") {
		t.Fatalf("unexpected output:\n%s", out)
	}
}

func TestDemoRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-loss", "0.9"}, {"-messages", "0"}, {"-rate", "0"}, {"-max-size", "0"}, {"-delay", "-1us"}, {"-delay", "2s"},
		{"-delay", "5"}, // no unit: not 5 ns
		{"stray"},
	} {
		_, err := execute(append([]string{"demo", "--inmem"}, args...)...)
		if err == nil {
			t.Errorf("%v accepted", args)
			continue
		}
		if !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "-")) && args[0] != "stray" {
			t.Errorf("%v: error %q does not name the flag", args, err)
		}
	}
}
