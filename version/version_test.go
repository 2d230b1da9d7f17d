package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	rev := "0123456789abcdef0123456789abcdef01234567"
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}}
	for _, tc := range []struct {
		name     string
		bi       *debug.BuildInfo
		over     string
		want     string
		wantRev  string
		modified bool
	}{
		{"no build info", nil, "", "devel", "", false},
		{"no build info, override", nil, "1.2.3", "1.2.3", "", false},
		{"devel, no vcs", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "", "devel", "", false},
		{"devel with vcs", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs}, "", "devel-0123456789ab", rev, false},
		{"devel, dirty tree", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: append(vcs[:2:2], debug.BuildSetting{Key: "vcs.modified", Value: "true"})}, "", "devel-0123456789ab-dirty", rev, true},
		{"module version", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}, Settings: vcs}, "", "v0.4.0", rev, false},
		{"override wins", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}, Settings: vcs}, "0.4.1-rc1", "0.4.1-rc1", rev, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := fromBuildInfo(tc.bi, tc.over)
			if i.Version != tc.want || i.Revision != tc.wantRev || i.Modified != tc.modified {
				t.Fatalf("got %+v, want version %q revision %q modified %v", i, tc.want, tc.wantRev, tc.modified)
			}
			if i.GoVersion == "" {
				t.Fatal("empty Go version")
			}
		})
	}
}

func TestGetInTestBinary(t *testing.T) {
	i := Get()
	if i.Version == "" || i.GoVersion != runtime.Version() {
		t.Fatalf("Get() = %+v", i)
	}
	if l := Long("smarttd"); !strings.HasPrefix(l, "smarttd "+i.Version+" (revision ") || !strings.Contains(l, runtime.Version()) {
		t.Fatalf("Long = %q", l)
	}
}

// TestLdflagsOverride builds a tiny program with -ldflags -X and checks the override is
// what it prints (the mechanism release builds use).
func TestLdflagsOverride(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	dir := t.TempDir()
	main := filepath.Join(dir, "main.go")
	os.WriteFile(main, []byte("package main\n\nimport (\n\t\"fmt\"\n\n\t\"github.com/smartt-transport/smartt/version\"\n)\n\nfunc main() { fmt.Print(version.String()) }\n"), 0o644)
	bin := filepath.Join(dir, "v")
	cmd := exec.Command("go", "build", "-o", bin, "-ldflags", "-X github.com/smartt-transport/smartt/version.override=9.8.7-test", main)
	cmd.Dir = "." // inside the module, so smartt/version resolves
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil || string(out) != "9.8.7-test" {
		t.Fatalf("binary printed %q (err %v), want 9.8.7-test", out, err)
	}
}
