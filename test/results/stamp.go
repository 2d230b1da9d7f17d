package results

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// A Stamp is what a region that no test reruns records about how it was made: digests of
// its body, of the files its command reads (with the command line) and of the Go code
// that computes it. TestDocsStamps recomputes all three, so a region edited by hand or
// whose inputs changed since its command last ran fails the tests.
type Stamp struct {
	Body, Files, Code string
	// Adopted: the digests were recorded for the table as it stood, without rerunning
	// its command (smartt-lab results -adopt); the page says so beside the table.
	Adopted bool
}

var stampRe = regexp.MustCompile(`^<!-- stamp body:([0-9a-f]{16}) files:([0-9a-f]{16}) code:([0-9a-f]{16}|-)( adopted)? -->$`)

// String is the stamp's line in the markdown.
func (s Stamp) String() string {
	a := ""
	if s.Adopted {
		a = " adopted"
	}
	return fmt.Sprintf("<!-- stamp body:%s files:%s code:%s%s -->", s.Body, s.Files, s.Code, a)
}

func parseStamp(line string) (*Stamp, bool) {
	m := stampRe.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return nil, false
	}
	return &Stamp{Body: m[1], Files: m[2], Code: m[3], Adopted: m[4] != ""}, true
}

// adoptedNote is the visible warning under the header of an adopted region.
func adoptedNote(name string) string {
	return "**Not rerun since its digests were first recorded**: this table may predate the current " +
		"simulator; `smartt-lab results -only " + name + "` regenerates it.\n\n"
}

func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// BodyDigest is the digest of a region's body as Parse returns it.
func BodyDigest(body string) string { return digest(normalise(body)) }

// Inputs are what a region's table is computed from: the files its command reads
// (scripts, scenario files, the files scenarios name) and the Go packages whose code
// computes it (directories relative to the root; Tests: with their _test.go files).
type Inputs struct {
	Files []string
	Code  []string
	Tests []string
}

// Module is this repository's Go module path.
const Module = "github.com/smartt-transport/smartt"

// labRoots are the packages behind smartt-lab's table-printing commands, by subcommand:
// the simulator and its sweeps (which import the engine, the controllers, the balancers,
// the switch model), RL-CC training, the hardware profiles. The lab's testbed and the
// daemon are not among them.
var labRoots = map[string][]string{
	"sim":       {"test/sweep"},
	"rlcc":      {"cc/rlcc/train"},
	"hwprofile": {"hwprofile/timing", "hwprofile"},
}

var (
	wordRe   = regexp.MustCompile(`[A-Za-z0-9_./-]+`)
	goPkgRe  = regexp.MustCompile(`^\./[A-Za-z0-9_/-]+/?$`)
	scenDir  = "test/sim/scenarios"
	fileRefs = regexp.MustCompile(`(?m)^\s*file:\s*"?([^"\s#]+)`)
)

// FindInputs works out a region's inputs from its command line: every word (and every
// comma- or equals-separated part of one) that names a file of the repository outside
// docs/, a shipped scenario ("incast_128", "reps_128.yaml") or a Go package directory
// ("./transport/smarttd"); a script among them is read for the same, one level deep.
// "smartt-lab" brings in the files of cmd/smartt-lab and the labRoots of the subcommands
// named (sim, rlcc, hwprofile; all of them if none is). Measured regions have no code
// inputs: they are measurements of a machine, redone by decision, not functions of the
// code.
func FindInputs(root string, r Region) (Inputs, error) {
	files := map[string]bool{}
	code := map[string]bool{}
	tests := map[string]bool{}
	var scan func(text string, depth int)
	lab := map[string]bool{} // smartt-lab subcommands named
	scan = func(text string, depth int) {
		if strings.Contains(text, "smartt-lab") && hasGo(filepath.Join(root, "cmd/smartt-lab")) {
			code["cmd/smartt-lab"] = true
			for sub := range labRoots {
				// The command's own subcommand; a script's: any it names.
				if strings.HasPrefix(text, "smartt-lab "+sub+" ") || (depth > 0 && slices.Contains(wordRe.FindAllString(text, -1), sub)) {
					lab[sub] = true
				}
			}
		}
		isGoTest := strings.Contains(text, "go test")
		for _, w := range wordRe.FindAllString(text, -1) {
			for _, p := range splitWord(w) {
				switch {
				case goPkgRe.MatchString(p) && hasGo(filepath.Join(root, p)):
					d := filepath.ToSlash(filepath.Clean(p))
					code[d] = true
					if isGoTest {
						tests[d] = true
					}
				case strings.HasPrefix(p, "docs/"): // the pages are what commands write
				case isFile(root, p):
					f := filepath.ToSlash(filepath.Clean(p))
					if !files[f] {
						files[f] = true
						if depth == 0 && !strings.HasSuffix(f, ".yaml") {
							b, _ := os.ReadFile(filepath.Join(root, f))
							scan(string(b), 1)
						}
					}
				case isFile(root, filepath.Join(scenDir, p+".yaml")):
					files[filepath.ToSlash(filepath.Join(scenDir, p+".yaml"))] = true
				case strings.HasSuffix(p, ".yaml") && isFile(root, filepath.Join(scenDir, p)):
					files[filepath.ToSlash(filepath.Join(scenDir, p))] = true
				}
			}
		}
	}
	scan(r.Cmd, 0)
	for f := range files { // the files scenarios name (workload.file), beside them
		if !strings.HasSuffix(f, ".yaml") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return Inputs{}, err
		}
		for _, m := range fileRefs.FindAllStringSubmatch(string(b), -1) {
			p := filepath.ToSlash(filepath.Join(filepath.Dir(f), m[1]))
			if isFile(root, p) {
				files[p] = true
			}
		}
	}
	if code["cmd/smartt-lab"] {
		delete(code, "cmd/smartt-lab")
		for sub, roots := range labRoots {
			if !lab[sub] && len(lab) > 0 {
				continue
			}
			for _, f := range labFiles[sub] {
				if isFile(root, "cmd/smartt-lab/"+f) {
					code["cmd/smartt-lab/"+f] = true
				}
			}
			for _, p := range roots {
				if hasGo(filepath.Join(root, p)) {
					code[p] = true
				}
			}
		}
	}
	in := Inputs{Files: sortedKeys(files)}
	if !r.Measured {
		in.Code, in.Tests = sortedKeys(code), sortedKeys(tests)
	}
	return in, nil
}

// splitWord returns w and its comma- and equals-separated parts.
func splitWord(w string) []string {
	out := []string{w}
	for _, p := range strings.FieldsFunc(w, func(c rune) bool { return c == ',' || c == '=' }) {
		if p != w {
			out = append(out, p)
		}
	}
	return out
}

func isFile(root, p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "..") || isBuildOutput(p) {
		return false
	}
	st, err := os.Stat(filepath.Join(root, p))
	return err == nil && st.Mode().IsRegular()
}

// isBuildOutput reports whether p is under build/, where the scripts put what they build
// (ignored by git): a binary there is an output, present on one machine and not on a
// fresh checkout, so it must not be an input of a stamp.
func isBuildOutput(p string) bool {
	return strings.HasPrefix(filepath.ToSlash(filepath.Clean(p)), "build/")
}

func hasGo(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	return len(m) > 0
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// FilesDigest is the digest of the command line and the contents of files.
func FilesDigest(root, cmd string, files []string) (string, error) {
	parts := []string{cmd}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return "", err
		}
		parts = append(parts, f, string(b))
	}
	return digest(parts...), nil
}

// labFiles are the files of cmd/smartt-lab that implement each subcommand of labRoots
// (main.go: the flags' parsing). Their own imports are not followed: labRoots are.
var labFiles = map[string][]string{
	"sim":       {"main.go", "sim.go", "sweep.go", "ailb.go"},
	"rlcc":      {"main.go", "rlcc.go"},
	"hwprofile": {"main.go", "hwprofile.go"},
}

// CodeDigest is the digest of the Go code of in.Code (package directories, or single
// files) and every package of this repository the packages import, directly or not: each file's tokens with comments and layout
// dropped (so a comment or gofmt does not make a table stale), every file whatever its
// build constraints (so the digest is the same on every machine), _test.go files only of
// in.Tests. It returns "-" for no code.
func CodeDigest(root string, in Inputs) (string, error) {
	if len(in.Code) == 0 {
		return "-", nil
	}
	seen := map[string]bool{}
	queue := slices.Clone(in.Code)
	var parts []string
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		if seen[dir] {
			continue
		}
		seen[dir] = true
		if strings.HasSuffix(dir, ".go") { // one file of a package (labFiles)
			src, err := os.ReadFile(filepath.Join(root, dir))
			if err != nil {
				return "", err
			}
			toks, _, err := goTokens(dir, src)
			if err != nil {
				return "", err
			}
			parts = append(parts, dir, toks)
			continue
		}
		withTests := slices.Contains(in.Tests, dir)
		names, err := goFiles(filepath.Join(root, dir), withTests)
		if err != nil {
			return "", err
		}
		for _, n := range names {
			rel := dir + "/" + n
			toks, imports, err := cachedTokens(filepath.Join(root, rel), rel)
			if err != nil {
				return "", err
			}
			parts = append(parts, rel, toks)
			for _, imp := range imports {
				if d, ok := strings.CutPrefix(imp, Module+"/"); ok {
					queue = append(queue, d)
				}
			}
		}
	}
	// The order files were reached in depends on the roots; the digest must not.
	pairs := make([][2]string, 0, len(parts)/2)
	for i := 0; i < len(parts); i += 2 {
		pairs = append(pairs, [2]string{parts[i], parts[i+1]})
	}
	slices.SortFunc(pairs, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	flat := make([]string, 0, len(parts))
	for _, p := range pairs {
		flat = append(flat, p[0], p[1])
	}
	return digest(flat...), nil
}

// tokCache holds goTokens' results by file, size and modification time: a test verifies
// dozens of regions over the same packages.
var tokCache sync.Map

type tokKey struct {
	path  string
	size  int64
	mtime int64
}

type tokVal struct {
	toks    string
	imports []string
}

func cachedTokens(path, rel string) (string, []string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", nil, err
	}
	k := tokKey{path, st.Size(), st.ModTime().UnixNano()}
	if v, ok := tokCache.Load(k); ok {
		return v.(tokVal).toks, v.(tokVal).imports, nil
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	toks, imports, err := goTokens(rel, src)
	if err == nil {
		tokCache.Store(k, tokVal{toks, imports})
	}
	return toks, imports, err
}

// goFiles lists a directory's .go files, sorted; _test.go files only withTests.
func goFiles(dir string, withTests bool) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || (!withTests && strings.HasSuffix(n, "_test.go")) {
			continue
		}
		out = append(out, n)
	}
	return out, nil
}

// goTokens returns a Go file's tokens without comments, one per line, and its imports.
func goTokens(name string, src []byte) (string, []string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
	if err != nil {
		return "", nil, err
	}
	var imports []string
	for _, is := range f.Imports {
		imports = append(imports, strings.Trim(is.Path.Value, `"`))
	}
	fs := token.NewFileSet()
	var s scanner.Scanner
	s.Init(fs.AddFile(name, -1, len(src)), src, nil, 0)
	var b strings.Builder
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON && lit == "\n" {
			lit = ";" // an inserted semicolon is layout
		}
		b.WriteString(tok.String())
		b.WriteByte(' ')
		b.WriteString(lit)
		b.WriteByte('\n')
	}
	return b.String(), imports, nil
}

// Compute returns the stamp a region with body should carry now.
func Compute(root string, r Region, body string) (Stamp, Inputs, error) {
	in, err := FindInputs(root, r)
	if err != nil {
		return Stamp{}, in, err
	}
	fd, err := FilesDigest(root, r.Cmd, in.Files)
	if err != nil {
		return Stamp{}, in, err
	}
	cd, err := CodeDigest(root, in)
	if err != nil {
		return Stamp{}, in, err
	}
	return Stamp{Body: BodyDigest(body), Files: fd, Code: cd}, in, nil
}

// Verify checks a region that no test reruns against its stamp: it fails when the
// region has none, when its body is not the one stamped (edited by hand), or when its
// command, input files or code changed since.
func Verify(root string, r Region) error {
	if r.Check {
		return nil // a test compares it with its command's output
	}
	regen := "run `smartt-lab results -only " + r.Name + "` (it reruns `" + r.Cmd + "`)"
	if r.Stamp == nil {
		return fmt.Errorf("no stamp line: %s", regen)
	}
	now, in, err := Compute(root, r, r.Body)
	if err != nil {
		return err
	}
	var why []string
	if now.Body != r.Stamp.Body {
		why = append(why, "its table was edited after its command wrote it")
	}
	if now.Files != r.Stamp.Files {
		why = append(why, fmt.Sprintf("its command line or files changed (%s)", strings.Join(in.Files, ", ")))
	}
	if now.Code != r.Stamp.Code {
		why = append(why, fmt.Sprintf("the Go code computing it changed (%s and their imports)", strings.Join(in.Code, ", ")))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s", strings.Join(why, "; "), regen)
}
