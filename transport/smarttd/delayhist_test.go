package smarttd_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/transport/smarttd"
)

// A delay lands in the first bucket whose bound it does not exceed; beyond the last bound
// in the overflow bucket; the sum is kept in ns.
func TestDelayHist(t *testing.T) {
	var h smarttd.DelayHist
	last := smarttd.DelayBound(smarttd.DelayBuckets - 1)
	for _, ns := range []int64{0, 1000, 1001, 4000, 4001, last, last + 1} {
		h.Observe(ns)
	}
	counts, sum := h.Snapshot()
	want := [smarttd.DelayBuckets + 1]uint64{0: 2, 1: 2, 2: 1, smarttd.DelayBuckets - 1: 1, smarttd.DelayBuckets: 1}
	if counts != want {
		t.Errorf("counts %v, want %v", counts, want)
	}
	if wantSum := uint64(1000 + 1001 + 4000 + 4001 + 2*last + 1); sum != wantSum {
		t.Errorf("sum %d, want %d", sum, wantSum)
	}
	if last != 262_144_000 {
		t.Errorf("last bound %d ns, want 262.144 ms (1 us * 4^9)", last)
	}
}

// A program that links no exporter refuses a config that asks for metrics, before any
// socket opens, and says what to do.
func TestStartWithoutExporterRefusesMetrics(t *testing.T) {
	cfg := smarttd.DefaultConfig()
	cfg.Metrics = "127.0.0.1:0"
	cfg.API.Socket = t.TempDir() + "/s.sock"
	opened := false
	_, err := smarttd.Start(cfg, smarttd.Options{OpenSocket: func(*smarttd.Config, *slog.Logger) (*smarttd.SocketLayer, error) {
		opened = true
		return nil, nil
	}})
	if err == nil || !strings.Contains(err.Error(), `metrics = "127.0.0.1:0"`) || !strings.Contains(err.Error(), `metrics: ""`) || opened {
		t.Errorf("err %v, sockets opened %v", err, opened)
	}
}
