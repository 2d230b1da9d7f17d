package results

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// stampTree is a repository with a script, a scenario naming a matrix file, and two
// packages, one importing the other.
func stampTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"go.mod":                         "module " + Module + "\n",
		"scripts/fig":                    "#!/bin/sh\ngo build -o /tmp/x ./cmd/lab\n/tmp/x run s1\n",
		"test/sim/scenarios/s1.yaml":     "workload:\n  kind: matrix\n  file: m.cm\n",
		"test/sim/scenarios/m.cm":        "0 1 4096\n",
		"test/sim/scenarios/unused.yaml": "x: 1\n",
		"cmd/lab/main.go":                "package main\n\nimport \"" + Module + "/sim\"\n\nfunc main() { sim.Run() }\n",
		"sim/sim.go":                     "package sim\n\n// Run runs.\nfunc Run() {}\n",
		"sim/sim_test.go":                "package sim\n",
		"docs/d.md":                      "# d\n",
		"unrelated/u.go":                 "package unrelated\n",
	}
	for f, c := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// stamped returns region r of a page holding body under a stamp computed now.
func stamped(t *testing.T, root string, r Region, body string, adopted bool) Region {
	t.Helper()
	st, _, err := Compute(root, r, body)
	if err != nil {
		t.Fatal(err)
	}
	st.Adopted = adopted
	attr := ""
	if r.Measured {
		attr = " measured"
	}
	text := "<!-- results:" + r.Name + attr + " cmd: " + r.Cmd + " -->\n" + Update{Body: body, Stamp: &st}.Content(r) + "<!-- /results -->\n"
	rs, err := Parse("d.md", text)
	if err != nil || len(rs) != 1 {
		t.Fatalf("%v %+v\n%s", err, rs, text)
	}
	return rs[0]
}

func write(t *testing.T, root, f, c string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, f), []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A stamp finds the script, the scenario and the file it names, and the Go code the
// script builds with its imports; it fails on each kind of change and not on others.
func TestStamp(t *testing.T) {
	root := stampTree(t)
	r := Region{Name: "fig", Cmd: "scripts/fig"}
	in, err := FindInputs(root, r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(in.Files, " ") != "scripts/fig test/sim/scenarios/m.cm test/sim/scenarios/s1.yaml" || strings.Join(in.Code, " ") != "cmd/lab" {
		t.Fatalf("%+v", in)
	}
	r = stamped(t, root, r, "| a | 1 |\n", false)
	if r.Stamp == nil || r.Body != "| a | 1 |\n" || Verify(root, r) != nil {
		t.Fatalf("fresh stamp: %+v %v", r, Verify(root, r))
	}
	// Neither a comment nor layout nor an unrelated file or scenario changes it.
	write(t, root, "sim/sim.go", "package sim\n\n// Run runs the simulation.\nfunc Run()   {\n}\n")
	write(t, root, "sim/sim_test.go", "package sim\n\nvar x = 1\n")
	write(t, root, "unrelated/u.go", "package unrelated\n\nvar y = 2\n")
	write(t, root, "test/sim/scenarios/unused.yaml", "x: 2\n")
	if err := Verify(root, r); err != nil {
		t.Fatalf("after a comment and unrelated changes: %v", err)
	}
	edited := r
	edited.Body = "| a | 2 |\n"
	if err := Verify(root, edited); err == nil || !strings.Contains(err.Error(), "edited") {
		t.Fatalf("hand edit: %v", err)
	}
	other := r
	other.Cmd = "scripts/fig -seeds 5"
	if err := Verify(root, other); err == nil || !strings.Contains(err.Error(), "command line or files") {
		t.Fatalf("other command: %v", err)
	}
	for _, c := range []struct{ file, text, want string }{
		{"test/sim/scenarios/m.cm", "0 1 8192\n", "files changed"},
		{"scripts/fig", "#!/bin/sh\ngo build -o /tmp/x ./cmd/lab\n/tmp/x run -v s1\n", "files changed"},
		{"sim/sim.go", "package sim\n\nfunc Run() { println() }\n", "Go code"},
	} {
		old, _ := os.ReadFile(filepath.Join(root, c.file))
		write(t, root, c.file, c.text)
		if err := Verify(root, r); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s changed: %v", c.file, err)
		}
		write(t, root, c.file, string(old))
	}
	if err := Verify(root, r); err != nil {
		t.Fatal(err)
	}
	unstamped := r
	unstamped.Stamp = nil
	if err := Verify(root, unstamped); err == nil || !strings.Contains(err.Error(), "no stamp") {
		t.Fatalf("no stamp: %v", err)
	}
}

// A measured region's stamp leaves out the code; an adopted one says so on the page.
func TestStampMeasuredAdopted(t *testing.T) {
	root := stampTree(t)
	m := stamped(t, root, Region{Name: "m", Cmd: "scripts/fig", Measured: true}, "| m |\n", false)
	a := stamped(t, root, Region{Name: "a", Cmd: "scripts/fig"}, "| a |\n", true)
	if m.Stamp.Code != "-" || !a.Stamp.Adopted || a.Body != "| a |\n" {
		t.Fatalf("%+v %+v", m.Stamp, a)
	}
	if c := (Update{Body: a.Body, Stamp: a.Stamp}).Content(a); !strings.Contains(c, "adopted -->\nMade by") || !strings.Contains(c, "Not rerun") {
		t.Fatalf("adopted content:\n%s", c)
	}
	write(t, root, "sim/sim.go", "package sim\n\nfunc Run() { println() }\n")
	if err := Verify(root, m); err != nil {
		t.Fatalf("measured region after a code change: %v", err)
	}
	if err := Verify(root, a); err == nil {
		t.Fatal("adopted region passed a code change")
	}
}

// Every region of the docs that no test reruns carries a stamp that still matches its
// body, its command's files and its code: a table edited by hand, or one whose scenario,
// script or simulator changed since it was written, fails here.
func TestDocsStamps(t *testing.T) {
	root, err := Root(".")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	adopted := 0
	for _, r := range rs {
		rel, _ := filepath.Rel(root, r.File)
		if err := Verify(root, r); err != nil {
			t.Errorf("%s:%d: region %s is stale: %v", rel, r.Line, r.Name, err)
		}
		if r.Stamp != nil && r.Stamp.Adopted {
			adopted++
			t.Logf("%s:%d: %s was adopted, not rerun", rel, r.Line, r.Name)
		}
	}
	t.Logf("%d regions, %d adopted", len(rs), adopted)
}

// A command naming what a script built under build/ (ignored by git) gets the same
// stamp whether or not the build is there: the stamp of a fresh checkout.
func TestBuildOutputsAreNoInputs(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "build", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "run.sh"), []byte("build/bin/tool x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := Region{Name: "m", Cmd: "./run.sh build/bin/tool", Measured: true}
	without, err := FindInputs(root, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "build", "bin", "tool"), []byte("v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	with, err := FindInputs(root, r)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(with.Files, without.Files) || !slices.Contains(with.Files, "run.sh") {
		t.Fatalf("inputs with a build %v, without %v", with.Files, without.Files)
	}
}
