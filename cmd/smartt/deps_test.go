package main

import (
	"os/exec"
	"strings"
	"testing"
)

// notLinked are what the operator CLI must not link: the simulator, testbed and results
// tools, RL training, plotting (gonum, fonts, LaTeX, PDF), the Prometheus exporter with
// protobuf, gopacket, and the Markdown renderer cobra/doc brings. Each is smartt-lab's or
// smarttd's.
var notLinked = []string{
	"github.com/smartt-transport/smartt/test/sim", "github.com/smartt-transport/smartt/test/sweep",
	"github.com/smartt-transport/smartt/test/bedrun", "github.com/smartt-transport/smartt/test/netbed",
	"github.com/smartt-transport/smartt/test/results", "github.com/smartt-transport/smartt/cc/rlcc/train",
	"github.com/smartt-transport/smartt/transport/metrics",
	"gonum.org/", "codeberg.org/", "git.sr.ht/", "github.com/ajstarks/", "github.com/golang/freetype", "golang.org/x/image",
	"github.com/prometheus/", "google.golang.org/protobuf", "github.com/gopacket/",
	"github.com/spf13/cobra/doc", "github.com/russross/blackfriday", "github.com/cpuguy83/go-md2man",
}

// TestOperatorCLIDependencies lists what `go build ./cmd/smartt` links and fails on any
// package of notLinked.
func TestOperatorCLIDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps: %d packages: %s", len(deps), out)
	}
	for _, d := range deps {
		for _, bad := range notLinked {
			if strings.HasPrefix(d, bad) {
				t.Errorf("smartt links %s (%s is not the operator CLI's)", d, bad)
			}
		}
	}
}
