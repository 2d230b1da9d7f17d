package results

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const doc = "# T\n\n```\n<!-- results:NAME [check] cmd: COMMAND -->\n```\n" + `
text
<!-- results:a check cmd: go test ./x -run T -v -->
old a
<!-- /results -->
between
<!-- results:b cmd: smartt-lab sim sweep 'p q' -set "x=1,2" -->
Made by ` + "`smartt-lab sim sweep 'p q' -set \"x=1,2\"`" + ` (` + "`smartt-lab results`" + ` rewrites it).

| b |
<!-- /results -->
end
`

func TestParseRewrite(t *testing.T) {
	rs, err := Parse("d.md", doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Name != "a" || !rs[0].Check || rs[0].Cmd != "go test ./x -run T -v" || rs[0].Body != "old a\n" || rs[0].Line != 8 {
		t.Fatalf("%+v", rs)
	}
	if rs[1].Check || rs[1].Body != "| b |\n" { // the command line above the table is not body
		t.Fatalf("%+v", rs[1])
	}
	out, changed, err := Rewrite("d.md", doc, map[string]Update{"a": {Body: "\nnew a  \n\n"}, "b": {Body: "| b |"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(changed) != 1 || changed[0] != "a" {
		t.Fatalf("changed %v", changed)
	}
	if !strings.Contains(out, "-->\nMade by `go test ./x -run T -v` (`smartt-lab results` rewrites it).\n\nnew a\n<!-- /results -->\nbetween") || !strings.HasSuffix(out, "| b |\n<!-- /results -->\nend\n") {
		t.Fatalf("rewritten:\n%s", out)
	}
	// Rewriting again changes nothing.
	if again, changed, _ := Rewrite("d.md", out, map[string]Update{"a": {Body: "new a"}, "b": {Body: "| b |"}}); again != out || len(changed) != 0 {
		t.Fatalf("not idempotent: %v", changed)
	}
	for _, bad := range []string{
		"<!-- results:x cmd: a -->\n",                            // not closed
		"<!-- /results -->\n",                                    // not opened
		"<!-- results:x cmd: a -->\n<!-- results:y cmd: b -->\n", // nested
		"<!-- results:x fast cmd: a -->\n<!-- /results -->\n",    // unknown attribute
		"<!-- results:x -->\n<!-- /results -->\n",                // no command
		"<!-- results:x check measured cmd: a -->\n<!-- /results -->\n",
		"<!-- results:x cmd: a -->\n<!-- stamp body:12 -->\n<!-- /results -->\n", // a malformed stamp
	} {
		if _, err := Parse("d.md", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestExtract(t *testing.T) {
	var b strings.Builder
	fmt.Fprintln(&b, "=== RUN TestX")
	Emit(&b, "one", "| 1 |\n")
	Emit(&b, "two", "| 2 |")
	fmt.Fprintln(&b, "PASS")
	if got, err := Extract(b.String(), "two"); err != nil || got != "| 2 |\n" {
		t.Fatalf("%q %v", got, err)
	}
	if _, err := Extract(b.String(), "three"); err == nil {
		t.Fatal("missing block found")
	}
	if got, _ := Extract("\n| plain |  \n\n", "any"); got != "| plain |\n" {
		t.Fatalf("%q", got)
	}
}

type fakeT struct{ errs []string }

func (f *fakeT) Helper()                   {}
func (f *fakeT) Errorf(s string, a ...any) { f.errs = append(f.errs, fmt.Sprintf(s, a...)) }
func (f *fakeT) Fatal(a ...any)            { f.errs = append(f.errs, fmt.Sprint(a...)) }

// Check fails when the docs show other figures, names the region and passes when they agree.
func TestCheck(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "docs", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(root, "go.mod"), []byte("module x\n"), 0o644)
	_ = os.WriteFile(filepath.Join(root, "docs", "sub", "d.md"), []byte(doc), 0o644)
	t.Chdir(filepath.Join(root, "docs"))
	t.Setenv(Env, "")
	var f fakeT
	Check(&f, "a", "old a\n")
	if len(f.errs) != 0 {
		t.Fatal(f.errs)
	}
	Check(&f, "a", "new a\n")
	if len(f.errs) != 1 || !strings.Contains(f.errs[0], "docs/sub/d.md:8: table a is stale") || !strings.Contains(f.errs[0], "+ new a") {
		t.Fatal(f.errs)
	}
	f.errs = nil
	Check(&f, "nosuch", "x")
	if len(f.errs) != 1 || !strings.Contains(f.errs[0], "no docs region nosuch") {
		t.Fatal(f.errs)
	}
	// While smartt-lab results regenerates, nothing is compared.
	t.Setenv(Env, "1")
	f.errs = nil
	Check(&f, "a", "new a\n")
	if len(f.errs) != 0 {
		t.Fatal(f.errs)
	}
	// Two regions of one name are refused.
	_ = os.WriteFile(filepath.Join(root, "docs", "e.md"), []byte(doc), 0o644)
	if _, err := Scan(root); err == nil || !strings.Contains(err.Error(), "also in") {
		t.Fatalf("duplicate names: %v", err)
	}
}

func TestFields(t *testing.T) {
	got, err := Fields(`sim sweep 'a b' -set "x=1, 2" c`)
	if err != nil || strings.Join(got, "|") != "sim|sweep|a b|-set|x=1, 2|c" {
		t.Fatalf("%q %v", got, err)
	}
	if _, err := Fields(`a 'b`); err == nil {
		t.Fatal("unterminated quote accepted")
	}
}
