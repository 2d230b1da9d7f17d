// Package results keeps the results tables in docs/ generated: a table sits between
//
//	<!-- results:NAME [check|measured] cmd: COMMAND -->
//	<!-- stamp body:... files:... code:... -->   (regions not marked check)
//	...
//	<!-- /results -->
//
// and is what COMMAND prints (the block COMMAND prints between "<!-- results:NAME -->"
// and "<!-- /results -->", or all of its output if it prints no such block). "smartt-lab
// results" reruns the commands and rewrites the regions; the test that prints a check
// table calls Check, so "go test" fails when the docs no longer show what it prints. A
// region too slow for the tests carries a Stamp instead, which TestDocsStamps verifies.
package results

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Env names the variable "smartt-lab results" sets while it reruns the commands: Check then
// prints the table without comparing it with the docs it is about to rewrite.
const Env = "SMARTT_RESULTS"

// Region is one generated table in a markdown file.
type Region struct {
	File  string // path of the markdown file
	Name  string // unique over the docs
	Cmd   string // the command whose output the region holds
	Check bool   // the "check" attribute: deterministic and fast; a test compares it
	// Measured: the "measured" attribute: a measurement of the machine it ran on, whose
	// stamp covers its body, command and files but not the code.
	Measured bool
	Stamp    *Stamp // the stamp line, if any
	Line     int    // of the opening marker, 1-based
	Body     string // what is between the markers, less the command line written above the table
	start    int    // byte offsets of the content between the markers
	end      int
}

var (
	openRe = regexp.MustCompile(`^<!-- results:([A-Za-z0-9_.-]+)((?: [a-z]+)*) cmd: (.+?) -->$`)
	close_ = "<!-- /results -->"
)

// header is the visible line the region starts with: the command beside its table.
func header(cmd string) string {
	return "Made by `" + cmd + "` (`smartt-lab results` rewrites it).\n\n"
}

// Parse finds the regions of one markdown file's text.
func Parse(file, text string) ([]Region, error) {
	var out []Region
	var cur *Region
	off := 0
	fenced := false // inside a ``` code block markers are examples, not regions
	for i, line := range strings.SplitAfter(text, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "```") && cur == nil:
			fenced = !fenced
		case fenced:
		case strings.HasPrefix(t, "<!-- results:"):
			m := openRe.FindStringSubmatch(t)
			if m == nil {
				return nil, fmt.Errorf("%s:%d: want <!-- results:NAME [check] cmd: COMMAND -->", file, i+1)
			}
			if cur != nil {
				return nil, fmt.Errorf("%s:%d: region %s opened inside %s", file, i+1, m[1], cur.Name)
			}
			attrs := strings.Fields(m[2])
			for _, a := range attrs {
				if a != "check" && a != "measured" {
					return nil, fmt.Errorf("%s:%d: unknown attribute %q (check or measured)", file, i+1, a)
				}
			}
			if len(attrs) > 1 {
				return nil, fmt.Errorf("%s:%d: check and measured exclude each other", file, i+1)
			}
			cur = &Region{File: file, Name: m[1], Cmd: m[3], Check: slices.Contains(attrs, "check"),
				Measured: slices.Contains(attrs, "measured"), Line: i + 1, start: off + len(line)}
		case t == close_:
			if cur == nil {
				return nil, fmt.Errorf("%s:%d: %s without an opening marker", file, i+1, close_)
			}
			cur.end = off
			cur.Body = text[cur.start:cur.end]
			if first, rest, ok := strings.Cut(cur.Body, "\n"); ok && strings.HasPrefix(first, "<!-- stamp ") {
				st, ok := parseStamp(first)
				if !ok {
					return nil, fmt.Errorf("%s:%d: want <!-- stamp body:HEX files:HEX code:HEX|- [adopted] -->", file, cur.Line+1)
				}
				cur.Stamp, cur.Body = st, rest
			}
			cur.Body = strings.TrimPrefix(cur.Body, header(cur.Cmd))
			cur.Body = strings.TrimPrefix(cur.Body, adoptedNote(cur.Name))
			out = append(out, *cur)
			cur = nil
		}
		off += len(line)
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: region %s is not closed (%s)", file, cur.Line, cur.Name, close_)
	}
	return out, nil
}

// Scan reads every markdown file under root/docs and returns their regions; names must
// be unique.
func Scan(root string) ([]Region, error) {
	var files []string
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []Region
	seen := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		rs, err := Parse(f, string(b))
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			if prev, ok := seen[r.Name]; ok {
				return nil, fmt.Errorf("%s:%d: region %s also in %s", f, r.Line, r.Name, prev)
			}
			seen[r.Name] = f
		}
		out = append(out, rs...)
	}
	return out, nil
}

// Root finds the repository root: the nearest directory at or above dir with a go.mod.
func Root(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", errors.New("no go.mod at or above " + dir)
		}
		d = up
	}
}

// Extract returns the block named name in a command's output, or, if the output has no
// blocks at all, the whole output.
func Extract(output, name string) (string, error) {
	if !strings.Contains(output, "<!-- results:") {
		return normalise(output), nil
	}
	open := "<!-- results:" + name + " -->\n"
	_, rest, ok := strings.Cut(output, open)
	if !ok {
		return "", fmt.Errorf("the command printed no block %q", name)
	}
	body, _, ok := strings.Cut(rest, close_)
	if !ok {
		return "", fmt.Errorf("block %q is not closed", name)
	}
	return normalise(body), nil
}

// normalise ends the text with exactly one newline and drops trailing spaces.
func normalise(s string) string {
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var lines []string
	for sc.Scan() {
		lines = append(lines, strings.TrimRight(sc.Text(), " \t"))
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	return strings.Join(lines, "\n") + "\n"
}

// Emit prints body as the block named name, for Extract.
func Emit(w io.Writer, name, body string) {
	fmt.Fprintf(w, "<!-- results:%s -->\n%s%s\n", name, normalise(body), close_)
}

// An Update is what Rewrite puts into a region: its body and, for a region not marked
// check, its stamp.
type Update struct {
	Body  string
	Stamp *Stamp
}

// Content is what a region holds between its markers.
func (u Update) Content(r Region) string {
	if u.Stamp == nil {
		return header(r.Cmd) + normalise(u.Body)
	}
	note := ""
	if u.Stamp.Adopted {
		note = adoptedNote(r.Name)
	}
	return u.Stamp.String() + "\n" + header(r.Cmd) + note + normalise(u.Body)
}

// Rewrite replaces the regions of text whose names are in updates; it returns the new
// text and the names that changed.
func Rewrite(file, text string, updates map[string]Update) (string, []string, error) {
	rs, err := Parse(file, text)
	if err != nil {
		return "", nil, err
	}
	var b strings.Builder
	var changed []string
	off := 0
	for _, r := range rs {
		u, ok := updates[r.Name]
		if !ok {
			continue
		}
		content := u.Content(r)
		if content != text[r.start:r.end] {
			changed = append(changed, r.Name)
		}
		b.WriteString(text[off:r.start])
		b.WriteString(content)
		off = r.end
	}
	b.WriteString(text[off:])
	return b.String(), changed, nil
}

// Check is for the test that prints a docs table: it prints body as block name (so the
// test's -v output carries it) and fails t if the docs region of that name differs.
func Check(t TB, name, body string) {
	t.Helper()
	Emit(os.Stdout, name, body)
	if os.Getenv(Env) != "" {
		return // being regenerated
	}
	root, err := Root(".")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Name != name {
			continue
		}
		if got := normalise(body); got != r.Body {
			rel, _ := filepath.Rel(root, r.File)
			t.Errorf("%s:%d: table %s is stale; run `smartt-lab results -only %s` (or `%s`).\n%s", rel, r.Line, name, name, r.Cmd, Diff(r.Body, got))
		}
		return
	}
	t.Errorf("no docs region %s (<!-- results:%s cmd: ... -->)", name, name)
}

// TB is the part of testing.TB Check uses.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatal(args ...any)
}

// Diff lists the lines that differ: "- docs" then "+ now".
func Diff(docs, now string) string {
	a, b := strings.Split(docs, "\n"), strings.Split(now, "\n")
	var out strings.Builder
	for i := range max(len(a), len(b)) {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			fmt.Fprintf(&out, "- %s\n+ %s\n", x, y)
		}
	}
	return out.String()
}

// Fields splits a command line into words as a POSIX shell would for the simple cases
// the docs use: blanks separate, '...' and "..." quote.
func Fields(cmd string) ([]string, error) {
	var out []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, c := range cmd {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				w.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				out = append(out, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote in %q", cmd)
	}
	if in {
		out = append(out, w.String())
	}
	return out, nil
}
