package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestDemoDeliversEverything(t *testing.T) {
	var out bytes.Buffer
	if err := runDemo([]string{"-messages", "8", "-max-size", "300000", "-loss", "0.05"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "8 of 8 messages delivered exactly once and intact") {
		t.Fatalf("unexpected output:\n%s", out.String())
	}
}

func TestDemoRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-loss", "0.9"}, {"-messages", "0"}, {"-rate", "0"}, {"-max-size", "0"}, {"-delay", "-1us"}, {"-delay", "2s"},
		{"-delay", "5"}, // no unit: not 5 ns
		{"stray"},
	} {
		var out bytes.Buffer
		err := runDemo(args, &out)
		if err == nil {
			t.Errorf("%v accepted", args)
			continue
		}
		if !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "-")) && args[0] != "stray" {
			t.Errorf("%v: error %q does not name the flag", args, err)
		}
	}
}
