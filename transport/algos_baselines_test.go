package transport

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/config"
)

// TestBaselineConfigBlocks: each baseline controller's transport.<name> block decodes
// strictly from YAML, selects its controller, and a bad value is refused by NewEndpoint
// with the field's name (and only when that controller is selected).
func TestBaselineConfigBlocks(t *testing.T) {
	for _, tc := range []struct {
		name, doc, bad, want string
		typ                  string
	}{
		{"dctcp", "cc: dctcp\ndctcp:\n  g_shift: 5\n", "cc: dctcp\ndctcp:\n  g_shift: 0\n", "dctcp.g_shift = 0", "*dctcp.DCTCP"},
		{"mprdma", "cc: mprdma\nmprdma:\n  max_window_bdp: 2\n", "cc: mprdma\nmprdma:\n  min_window_mtus: 0\n", "mprdma.min_window_mtus = 0", "*dctcp.MPRDMA"},
		{"swift", "cc: swift\nswift:\n  hops: 4\n  beta: 0.5\n", "cc: swift\nswift:\n  max_mdf: 1.5\n", "swift.max_mdf = 1.5", "*swift.Swift"},
		{"nscc", "cc: nscc\nnscc:\n  gamma: 0.5\n  qa_gate_shift: 2\n", "cc: nscc\nnscc:\n  adjust_mtus: 0\n", "nscc.adjust_mtus = 0", "*nscc.NSCC"},
		{"dcqcn", "cc: dcqcn\ndcqcn:\n  rate_timer: 20us\n  ai_rate: 80Mbit\n", "cc: dcqcn\ndcqcn:\n  g_shift: 20\n", "dcqcn.g_shift = 20", "*dcqcn.DCQCN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if err := config.DecodeYAML([]byte(tc.doc), &cfg); err != nil {
				t.Fatal(err)
			}
			ep, err := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2)))
			if err != nil {
				t.Fatal(err)
			}
			if got := reflect.TypeOf(ep.hooks.NewCC()).String(); got != tc.typ {
				t.Fatalf("cc %s built %s", tc.name, got)
			}
			bad := DefaultConfig()
			if err := config.DecodeYAML([]byte(tc.bad), &bad); err != nil {
				t.Fatal(err)
			}
			if _, err := NewEndpoint(bad, rand.New(rand.NewPCG(1, 2))); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			bad.CC = "fixed"
			if _, err := NewEndpoint(bad, rand.New(rand.NewPCG(1, 2))); err != nil {
				t.Fatalf("the %s block was checked with cc fixed: %v", tc.name, err)
			}
		})
	}
	doc := "cc: dctcp\ndctcp:\n  nonsense: 1\n"
	cfg := DefaultConfig()
	if err := config.DecodeYAML([]byte(doc), &cfg); err == nil {
		t.Fatal("an unknown key in dctcp: was accepted")
	}
}
