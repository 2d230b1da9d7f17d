package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// check --config prints smarttd -check-config's verdict: the effective config of a good
// file, every error of a bad one (naming the key and the allowed range).
func TestCheckConfigFile(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("listen: 10.0.0.1:23600\nudp:\n  recv_buffer: 8MiB\n"), 0o644)
	os.WriteFile(bad, []byte("transport:\n  min_rto: 20s\nudp:\n  data_dscp: 64\n"), 0o644)
	out, err := execute("check", "--config", good)
	if err != nil || !strings.Contains(out, good+": valid") || !strings.Contains(out, "listen: 10.0.0.1:23600") || !strings.Contains(out, "# worst-case memory") {
		t.Errorf("good config: %v\n%s", err, out)
	}
	_, err = execute("check", "--config", bad)
	if err == nil || !strings.Contains(err.Error(), "transport.min_rto = 20s: must be in 1us..10s") || !strings.Contains(err.Error(), "udp.data_dscp = 64: must be in 0..63") {
		t.Errorf("bad config: %v", err)
	}
	if _, err := execute("check", "--config", filepath.Join(dir, "none.yaml")); err == nil {
		t.Error("missing config file: no error")
	}
}

// check against a running daemon prints one line per check and "healthy"; against a
// socket nobody serves it fails and says how to start one.
func TestCheckDaemon(t *testing.T) {
	dir := t.TempDir()
	ds := quietPair(t, dir)
	out, err := execute("check", "--socket", ds[0].Config.API.Socket)
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	t.Log("\n" + out)
	for _, want := range []string{"ok    smarttd ", "answers on " + ds[0].Config.API.Socket, "listening on " + ds[0].Config.Listen.String(),
		"ok    memory: worst case ", "api: 0 of ", "sockets: ", "healthy ("} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "FAIL") {
		t.Errorf("a healthy daemon failed a check:\n%s", out)
	}
	// --config with --socket checks both.
	cfgFile := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfgFile, []byte("log_level: warn\n"), 0o644)
	if out, err := execute("check", "--config", cfgFile, "--socket", ds[0].Config.API.Socket); err != nil || !strings.Contains(out, ": valid") || !strings.Contains(out, "healthy (") {
		t.Errorf("check --config --socket: %v\n%s", err, out)
	}
	_, err = execute("check", "--socket", filepath.Join(dir, "nobody.sock"), "--timeout", "2s")
	if err == nil || !strings.Contains(daemonHint(err).Error(), "no smarttd answers on that socket") {
		t.Errorf("no daemon: %v", err)
	}
}

// The health verdicts: a limit at 90 % warns, a daemon shutting down fails.
func TestCheckNear(t *testing.T) {
	for _, c := range []struct {
		used, limit int64
		want        bool
	}{{89, 100, false}, {90, 100, true}, {100, 100, true}, {5, 0, false}} {
		if got := near(c.used, c.limit); got != c.want {
			t.Errorf("near(%d, %d) = %v", c.used, c.limit, got)
		}
	}
}
