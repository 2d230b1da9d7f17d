package scenarios

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEmbeddedMatchFiles(t *testing.T) {
	on, _ := filepath.Glob("*.yaml")
	if len(on) == 0 || len(on) != len(Names()) {
		t.Fatalf("%d files, %d embedded", len(on), len(Names()))
	}
	for _, f := range on {
		want, _ := os.ReadFile(f)
		got, err := Read(strings.TrimSuffix(f, ".yaml"))
		if err != nil || string(got) != string(want) {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if _, err := Read("no_such"); err == nil || !strings.Contains(err.Error(), "permutation_128") {
		t.Fatalf("unknown name: %v", err)
	}
}
