package transport

import (
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/config"
)

// The YAML form of Config is what the daemon's config file and the simulator's scenario
// files embed: human units for times and rates, strict field names.
func TestConfigYAML(t *testing.T) {
	cfg := DefaultConfig()
	doc := "mtu: 2048\nmin_rto: 50us\nbase_rtt: 8us\nlink_rate: 400Gbit\ntrimming: false\nack:\n  every: 4\n"
	if err := config.DecodeYAML([]byte(doc), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.MTU != 2048 || cfg.MinRTO != 50_000 || cfg.BaseRTT != 8_000 || cfg.LinkRate != 400e9 ||
		cfg.Trimming || cfg.Ack.Every != 4 {
		t.Fatalf("decoded %+v", cfg)
	}
	if cfg.MaxRTO != DefaultConfig().MaxRTO || cfg.Ack.SackWords != DefaultConfig().Ack.SackWords {
		t.Fatal("fields absent from the document lost their defaults")
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	err := config.DecodeYAML([]byte("min_rto: soon\n"), &cfg)
	if err == nil || !strings.Contains(err.Error(), "soon") {
		t.Fatalf("bad duration: err = %v", err)
	}
	err = config.DecodeYAML([]byte("mtuu: 1\n"), &cfg)
	if err == nil || !strings.Contains(err.Error(), "mtuu") {
		t.Fatalf("unknown field: err = %v", err)
	}
}

// TestRetransmitLimitsAtAndBeyond: the two per-packet limits accept their bounds and
// name themselves beyond them.
func TestRetransmitLimitsAtAndBeyond(t *testing.T) {
	for _, c := range []struct {
		retx, trims int
		bad         string
	}{
		{1, 1, ""}, {255, 60000, ""},
		{0, 1024, "max_retransmits = 0"}, {256, 1024, "max_retransmits = 256"},
		{15, 0, "max_trims = 0"}, {15, 60001, "max_trims = 60001"},
	} {
		cfg := DefaultConfig()
		cfg.MaxRetransmits, cfg.MaxTrims = c.retx, c.trims
		err := cfg.Validate()
		if (c.bad == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.bad)) {
			t.Errorf("max_retransmits %d, max_trims %d: err = %v, want %q", c.retx, c.trims, err, c.bad)
		}
	}
}
