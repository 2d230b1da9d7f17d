package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// containerLdflags returns the -ldflags of every go build in deploy/Containerfile, with the
// shell's ${VERSION:+...} and ${VERSION} expanded for version.
func containerLdflags(t *testing.T, version string) []string {
	t.Helper()
	b, err := os.ReadFile("../../deploy/Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	var flags []string
	for _, m := range regexp.MustCompile(`-ldflags "([^"]*)"`).FindAllStringSubmatch(string(b), -1) {
		f := regexp.MustCompile(`\$\{VERSION:\+([^}]*\$\{VERSION\}[^}]*)\}`).ReplaceAllString(m[1], "$1")
		flags = append(flags, strings.ReplaceAll(f, "${VERSION}", version))
	}
	if len(flags) != 2 {
		t.Fatalf("found %d go build -ldflags in deploy/Containerfile, want 2 (smarttd and smartt)", len(flags))
	}
	return flags
}

// A build with the Containerfile's exact -ldflags reports the version it was given, not
// "devel" (the -X path was the module path twice, which the linker ignores silently).
func TestContainerfileVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds smarttd: not in -short")
	}
	for _, f := range containerLdflags(t, "9.8.7-test") {
		if !strings.Contains(f, "-X github.com/smartt-transport/smartt/version.override=9.8.7-test") {
			t.Fatalf("ldflags %q do not set version.override", f)
		}
	}
	bin := filepath.Join(t.TempDir(), "smarttd")
	// The Containerfile's -ldflags; not its -trimpath and CGO_ENABLED=0, which change no
	// linker flag but would rebuild every package instead of using the build cache.
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-ldflags", containerLdflags(t, "9.8.7-test")[0], "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "-version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "smarttd 9.8.7-test ") || strings.Contains(string(out), "devel") {
		t.Fatalf("-version: %q, %v", out, err)
	}
}
