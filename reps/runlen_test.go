package reps

import (
	"encoding/json"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// reps.run reads and writes as a length 1..MaxRun or "auto" (the default, RunAuto), in
// YAML and JSON; 0, MaxRun+1 and words are refused naming the range; the engine applies
// auto as 1.
func TestRunLenKey(t *testing.T) {
	if r := DefaultConfig().Run; r != RunAuto || r.Len() != 1 || r.String() != "auto" {
		t.Fatalf("default run %v (len %d), want auto (len 1)", r, r.Len())
	}
	if err := (&Config{Entries: 8, FreezeDuration: 1_000_000, PLB: PLBConfig{CEPercent: 50, Rounds: 1}, Subflows: 8}).Validate(256); err != nil {
		t.Fatalf("run auto refused: %v", err)
	}
	for doc, want := range map[string]RunLen{"run: auto\n": RunAuto, "run: 1\n": 1, "run: 15\n": 15, "run: 64\n": MaxRun} {
		var c Config
		c.Run = 7
		if err := yaml.Unmarshal([]byte(doc), &c); err != nil || c.Run != want {
			t.Errorf("%q: run %v, %v; want %v", doc, c.Run, err, want)
			continue
		}
		out, err := yaml.Marshal(c)
		var back Config
		if err != nil || yaml.Unmarshal(out, &back) != nil || back.Run != want {
			t.Errorf("%q: written as %q, read back %v", doc, out, back.Run)
		}
		j, err := json.Marshal(c.Run)
		var jr RunLen = 7
		if err != nil || json.Unmarshal(j, &jr) != nil || jr != want {
			t.Errorf("%q: JSON %s read back %v", doc, j, jr)
		}
	}
	if j, _ := json.Marshal(RunAuto); string(j) != `"auto"` {
		t.Errorf("JSON of auto: %s", j)
	}
	for _, v := range []string{"0", "65", "-1", "many", "1.5"} {
		var c Config
		if err := yaml.Unmarshal([]byte("run: "+v+"\n"), &c); err == nil || !strings.Contains(err.Error(), "must be in 1..64 or auto") {
			t.Errorf("run: %s: error %v", v, err)
		}
		if v == "many" {
			v = `"many"` // valid JSON, not a length
		}
		var r RunLen
		if err := json.Unmarshal([]byte(v), &r); err == nil || !strings.Contains(err.Error(), "must be in 1..64 or auto") {
			t.Errorf("JSON %s: error %v", v, err)
		}
	}
	if got := RunLen(MaxRun).Len(); got != MaxRun {
		t.Errorf("Len of %d: %d", MaxRun, got)
	}
}
