package transport

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/cc/rlcc/rlccnet"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/hwprofile"
)

func TestRLCCAndProfileYAML(t *testing.T) {
	cfg := DefaultConfig()
	doc := "cc: rlcc\nprofile: cx6dx\npacing_burst: 16384\nrlcc:\n  target: 0.08\n  initial_rate: 0.5\n  limits: {max_trees: 8, max_depth: 4}\n"
	if err := config.DecodeYAML([]byte(doc), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.CC != "rlcc" || cfg.Profile != "cx6dx" || cfg.PacingBurst != 16384 || cfg.RLCC.Target != 0.08 ||
		cfg.RLCC.InitialRate != 0.5 || cfg.RLCC.Limits.MaxTrees != 8 {
		t.Fatalf("decoded %+v", cfg)
	}
	if cfg.RLCC.Beta != 1.5 {
		t.Fatal("rlcc fields absent from the document lost their defaults")
	}
	// The default model has 10 trees: max_trees 8 refuses it at NewEndpoint, naming the limit.
	_, err := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 1)))
	if err == nil || !strings.Contains(err.Error(), "max_trees") {
		t.Fatalf("10-tree model under max_trees 8: %v", err)
	}
	cfg.RLCC.Limits.MaxTrees = 10
	if _, err := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 1))); err != nil {
		t.Fatal(err)
	}
	if err := config.DecodeYAML([]byte("rlcc:\n  targett: 1\n"), &cfg); err == nil || !strings.Contains(err.Error(), "targett") {
		t.Fatalf("unknown rlcc field: %v", err)
	}
	cfg.PacingBurst = -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "pacing_burst") {
		t.Fatalf("negative pacing_burst: %v", err)
	}
}

// TestRLCCPolicyMLP: `rlcc: {policy: mlp}` runs the float policy network the trees were
// distilled from (simulator and training); a bad policy or network file is refused,
// naming the field.
func TestRLCCPolicyMLP(t *testing.T) {
	cfg := DefaultConfig()
	if err := config.DecodeYAML([]byte("cc: rlcc\nrlcc:\n  policy: mlp\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	ctl, err := NewCC("rlcc", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ctl.(*rlccnet.NetController); !ok {
		t.Fatalf("policy mlp built %T", ctl)
	}
	if c := ctl.(hwprofile.Coster).Cost(); c.IntegerOnly || c.Ops == 0 {
		t.Fatalf("network cost %+v: want floating point with its flops", c)
	}
	cfg.RLCC.Policy = "lstm"
	if _, err := NewCC("rlcc", cfg); err == nil || !strings.Contains(err.Error(), "rlcc.policy") {
		t.Fatalf("policy lstm: %v", err)
	}
	cfg.RLCC.Policy, cfg.RLCC.MLP = "mlp", "/nonexistent/policy.json"
	if _, err := NewCC("rlcc", cfg); err == nil || !strings.Contains(err.Error(), "rlcc.mlp") {
		t.Fatalf("missing network file: %v", err)
	}
}
