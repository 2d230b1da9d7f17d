package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/transport/smarttd"
)

// A daemon of this program asked for recovery.mode: ec refuses to start before any socket
// opens, naming the key and the program that has the erasure code; smartt check accepts
// the same config, which smarttd runs.
func TestDemoDaemonRefusesECNamingSmarttd(t *testing.T) {
	cfg := smarttd.DefaultConfig()
	cfg.Metrics = ""
	cfg.API.Socket = filepath.Join(t.TempDir(), "s.sock")
	cfg.Transport.Recovery.Mode = "ec"
	opened := false
	_, err := smarttd.Start(cfg, smarttd.Options{Logger: slog.New(slog.DiscardHandler),
		OpenSocket: func(*smarttd.Config, *slog.Logger) (*smarttd.SocketLayer, error) {
			opened = true
			return nil, os.ErrInvalid
		}})
	if err == nil || !strings.Contains(err.Error(), `transport.recovery.mode = "ec"`) || !strings.Contains(err.Error(), "smarttd") {
		t.Errorf("Start with recovery ec: %v", err)
	}
	if opened {
		t.Error("the sockets were opened before the config was refused")
	}
	file := filepath.Join(t.TempDir(), "ec.yaml")
	os.WriteFile(file, []byte("transport:\n  recovery:\n    mode: ec\n"), 0o644)
	if out, err := execute("check", "--config", file); err != nil || !strings.Contains(out, ": valid") {
		t.Errorf("smartt check --config of an ec config smarttd runs: %v\n%s", err, out)
	}
}
