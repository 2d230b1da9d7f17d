package transport

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/cc/smartt"
	"github.com/smartt-transport/smartt/config"
)

// SMaRTT is the default; its YAML section decodes strictly and bad values are refused
// with the field's name; "smartt-fixed" and fixed_point select the integer version.
func TestSMaRTTConfig(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.CC != "smartt" {
		t.Fatalf("default cc = %q", cfg.CC)
	}
	doc := "cc: smartt\nsmartt:\n  fixed_point: true\n  react_every: 4\n  base_rtt: 8us\n"
	if err := config.DecodeYAML([]byte(doc), &cfg); err != nil {
		t.Fatal(err)
	}
	if !cfg.SMaRTT.FixedPoint || cfg.SMaRTT.ReactEvery != 4 || cfg.SMaRTT.BaseRTT != 8000 || cfg.SMaRTT.FD != 0.8 {
		t.Fatalf("decoded %+v", cfg.SMaRTT)
	}
	ep, err := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ep.hooks.NewCC().(*smartt.Fixed); !ok {
		t.Fatal("fixed_point did not select smartt.Fixed")
	}
	cfg.CC, cfg.SMaRTT.FixedPoint = "smartt", false
	if ep, _ = NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2))); ep == nil {
		t.Fatal("no endpoint")
	} else if _, ok := ep.hooks.NewCC().(*smartt.Float); !ok {
		t.Fatal("smartt did not select smartt.Float")
	}
	cfg.SMaRTT.ReactEvery = 0
	if _, err := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2))); err == nil || !strings.Contains(err.Error(), "smartt.react_every = 0") {
		t.Fatalf("bad react_every: err = %v", err)
	}
	cfg.CC = "fixed" // SMaRTT's section is not checked when another controller is selected
	if _, err := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2))); err != nil {
		t.Fatal(err)
	}
}
