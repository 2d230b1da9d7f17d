package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/test/results"
	"github.com/smartt-transport/smartt/test/sim"
	"github.com/smartt-transport/smartt/test/sweep"
)

// smartt-lab results reruns each region's command and rewrites only what changed; -check
// fails while a table is stale.
func TestResultsCommand(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "docs"), 0o755))
	must(os.WriteFile(filepath.Join(root, "go.mod"), []byte("module x\n"), 0o644))
	must(os.WriteFile(filepath.Join(root, "s.yaml"), []byte(sweepScen), 0o644))
	doc := "# d\n\n<!-- results:sweep check cmd: smartt-lab sim sweep s.yaml -set transport.lb=ecmp,ops -out out -plots none -progress=false -show completion_rel -->\n| stale |\n<!-- /results -->\n\n" +
		"<!-- results:shell cmd: printf '<!-- results:shell -->\\n| from sh |\\n<!-- /results -->\\n' -->\n<!-- /results -->\n"
	must(os.WriteFile(filepath.Join(root, "docs", "d.md"), []byte(doc), 0o644))
	var out, errb bytes.Buffer
	err := runResults([]string{"-root", root, "-check"}, &out, &errb)
	if err == nil || !strings.Contains(out.String(), "stale docs/d.md: sweep") || !strings.Contains(out.String(), "stale docs/d.md: shell") {
		t.Fatalf("check of stale docs: %v\n%s\n%s", err, out.String(), errb.String())
	}
	if b, _ := os.ReadFile(filepath.Join(root, "docs", "d.md")); string(b) != doc {
		t.Fatal("-check rewrote the docs")
	}
	if _, err := os.Stat(filepath.Join(root, "out")); err == nil {
		t.Fatal("-check let the sweep write its -out into the tree")
	}
	out.Reset()
	if err := runResults([]string{"-root", root}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	b, _ := os.ReadFile(filepath.Join(root, "docs", "d.md"))
	if !strings.Contains(string(b), "Made by `smartt-lab sim sweep s.yaml") || !strings.Contains(string(b), "| ops | 1 |") ||
		!strings.Contains(string(b), "\n| from sh |\n<!-- /results -->") || strings.Contains(string(b), "stale") {
		t.Fatalf("rewritten:\n%s", b)
	}
	out.Reset()
	if err := runResults([]string{"-root", root, "-check"}, &out, &errb); err != nil || !strings.Contains(out.String(), "2 tables, 0 stale") {
		t.Fatalf("after the rewrite: %v %s", err, out.String())
	}
	out.Reset()
	if err := runResults([]string{"-root", root, "-list"}, &out, &errb); err != nil || !strings.Contains(out.String(), "sweep [check]\tdocs/d.md:3\tsmartt-lab sim sweep") {
		t.Fatalf("list: %v %s", err, out.String())
	}
	testResultsStamps(t, root)
	if err := runResults([]string{"-root", root, "-only", "nosuch"}, &out, &errb); err == nil {
		t.Fatal("-only nosuch accepted")
	}
}

// Every results region of the real docs parses; a region marked check is compared by a
// test: a go test command's package calls results.Check with its name, and a smartt
// command is rerun here.
func TestDocsResults(t *testing.T) {
	root, regions := docsRoot(t)
	if len(regions) == 0 {
		t.Fatal("no results regions in docs/")
	}
	for _, r := range regions {
		if !r.Check {
			continue
		}
		args, err := results.Fields(r.Cmd)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case len(args) > 2 && args[0] == "go" && args[1] == "test":
			if !strings.Contains(r.Cmd, " -v") {
				t.Errorf("%s: %q lacks -v: go test hides the tables of passing tests", r.Name, r.Cmd)
			}
			pkg := ""
			for _, a := range args[2:] {
				if strings.HasPrefix(a, "./") {
					pkg = a
				}
			}
			files, _ := filepath.Glob(filepath.Join(root, pkg, "*_test.go"))
			found := false
			for _, f := range files {
				b, _ := os.ReadFile(f)
				found = found || strings.Contains(string(b), `results.Check(t, "`+r.Name+`"`)
			}
			if !found {
				t.Errorf("%s: no test in %s calls results.Check(t, %q, ...)", r.Name, pkg, r.Name)
			}
		case args[0] == "smartt-lab" || args[0] == "smartt":
			// Files the command writes (a sweep's -out) go to a temporary directory, not
			// into the repository.
			scratchOut(args, t.TempDir())
			out, err := runSmarttIn(root, args[1:], &bytes.Buffer{})
			if err != nil {
				t.Fatalf("%s: %v", r.Cmd, err)
			}
			got, err := results.Extract(out, r.Name)
			if err != nil {
				t.Fatal(err)
			}
			if got != r.Body {
				t.Errorf("%s:%d: table %s is stale; run smartt-lab results -only %s\n%s", r.File, r.Line, r.Name, r.Name, results.Diff(r.Body, got))
			}
		default:
			t.Errorf("%s: check regions are for go test and smartt-lab commands", r.Name)
		}
	}
}

// The region no test reruns got a stamp: -stale passes until its table is edited by hand;
// -adopt then records it as it stands and says so on the page.
func testResultsStamps(t *testing.T, root string) {
	t.Helper()
	page := filepath.Join(root, "docs", "d.md")
	b, _ := os.ReadFile(page)
	if !strings.Contains(string(b), "-->\n<!-- stamp body:") || strings.Count(string(b), "<!-- stamp ") != 1 {
		t.Fatalf("want one stamp, on the shell region:\n%s", b)
	}
	var out, errb bytes.Buffer
	if err := runResults([]string{"-root", root, "-stale"}, &out, &errb); err != nil || !strings.Contains(out.String(), "2 tables, 0 whose") {
		t.Fatalf("-stale after a rewrite: %v %s", err, out.String())
	}
	// -adopt leaves a region whose stamp matches as it is: still verified, not adopted.
	out.Reset()
	if err := runResults([]string{"-root", root, "-adopt"}, &out, &errb); err != nil || !strings.Contains(out.String(), "2 tables, 0 rewritten") {
		t.Fatalf("-adopt of fresh tables: %v %s", err, out.String())
	}
	edited := strings.Replace(string(b), "\n| from sh |\n<!-- /results -->", "\n| typed |\n<!-- /results -->", 1)
	if err := os.WriteFile(page, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runResults([]string{"-root", root, "-stale"}, &out, &errb); err == nil || !strings.Contains(out.String(), "its table was edited after its command wrote it: run") {
		t.Fatalf("-stale after a hand edit: %v %s", err, out.String())
	}
	out.Reset()
	if err := runResults([]string{"-root", root, "-adopt"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(page)
	if !strings.Contains(string(b), " adopted -->") || !strings.Contains(string(b), "**Not rerun") || !strings.Contains(string(b), "| typed |") {
		t.Fatalf("adopted:\n%s", b)
	}
	out.Reset()
	if err := runResults([]string{"-root", root, "-stale"}, &out, &errb); err != nil {
		t.Fatalf("-stale after -adopt: %v %s", err, out.String())
	}
	out.Reset()
	if err := runResults([]string{"-root", root, "-list"}, &out, &errb); err != nil || !strings.Contains(out.String(), "shell [adopted]") {
		t.Fatalf("list: %v %s", err, out.String())
	}
}

// Every sweep.json and sweep.csv under docs/results has the columns the current
// simulator writes, unless every region whose command writes it is adopted (not rerun
// since its stamp was recorded; its page says so): files from an older binary are
// rewritten with their table.
func TestDocsSweepColumns(t *testing.T) {
	root, err := results.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := (&sim.Result{}).WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	current, _, err := sweep.Metrics(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	regions, err := results.Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "docs/results/*/sweep.json"))
	more, _ := filepath.Glob(filepath.Join(root, "docs/results/*/*/sweep.json"))
	for _, f := range append(files, more...) {
		dir, _ := filepath.Rel(root, filepath.Dir(f))
		owners, adopted := sweepOwners(root, dir, regions)
		if owners == 0 {
			t.Errorf("%s: no results region's command writes it", dir)
			continue
		}
		var tab sweep.Table
		raw, _ := os.ReadFile(f)
		if err := json.Unmarshal(raw, &tab); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var missing []string
		for _, m := range current {
			if !slices.Contains(tab.Metrics, m) {
				missing = append(missing, m)
			}
		}
		csvHead, _, _ := strings.Cut(string(must(os.ReadFile(filepath.Join(root, dir, "sweep.csv")))), "\n")
		var want bytes.Buffer
		_ = (&sweep.Table{Sweep: tab.Sweep, Metrics: tab.Metrics}).WriteCSV(&want)
		if strings.TrimSpace(want.String()) != strings.TrimSpace(csvHead) {
			t.Errorf("%s: sweep.csv's header is not sweep.json's columns", dir)
		}
		switch {
		case len(missing) > 0 && owners == adopted:
			t.Logf("%s: from an older binary (lacks %s); its regions are adopted", dir, strings.Join(missing, ", "))
		case len(missing) > 0:
			t.Errorf("%s: lacks the current columns %s; rerun the region that writes it", dir, strings.Join(missing, ", "))
		}
	}
}

// sweepOwners counts the regions whose command (or the script it runs) writes dir, and
// how many of them are adopted.
func sweepOwners(root, dir string, regions []results.Region) (owners, adopted int) {
	for _, r := range regions {
		text := r.Cmd
		if args, err := results.Fields(r.Cmd); err == nil && len(args) > 0 && strings.HasPrefix(args[0], "scripts/") {
			b, _ := os.ReadFile(filepath.Join(root, args[0]))
			text += "\n" + string(b)
		}
		// A script that joins its output folder and a name owns the folders whose names it
		// spells: another script sharing the folder does not own this one's sweeps.
		quoted := func(s string) bool { return strings.Contains(text, `"`+s+`"`) }
		if !strings.Contains(text, dir) && !(quoted(filepath.Dir(dir)) && quoted(filepath.Base(dir))) {
			continue
		}
		owners++
		if r.Stamp != nil && r.Stamp.Adopted {
			adopted++
		}
	}
	return owners, adopted
}

func must[T any](v T, _ error) T { return v }
