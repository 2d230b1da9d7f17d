package cli

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// tree is a small command tree with the kinds of flags the CLIs have.
func tree() *cobra.Command {
	root := &cobra.Command{Use: "t", Version: "1"}
	send := Leaf("send FILE", "", "", cobra.ExactArgs(1), func(fs *pflag.FlagSet) RunFunc {
		fs.String("to", "", "")
		fs.Duration("timeout", 0, "")
		fs.Bool("json", false, "")
		fs.IntP("jobs", "j", 1, "")
		fs.BoolP("verbose", "v", false, "")
		fs.Int("n", 0, "")
		return func([]string, io.Writer) error { return nil }
	})
	exec := NoInterspersed(Leaf("exec NODE CMD", "", "", cobra.MinimumNArgs(2), func(fs *pflag.FlagSet) RunFunc {
		fs.String("name", "", "")
		return func([]string, io.Writer) error { return nil }
	}))
	root.AddCommand(send, Group("tb", "", "", exec), &cobra.Command{Use: "version", Run: func(*cobra.Command, []string) {}})
	return root
}

func TestNormalizeArgs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"send -to h:1 f -timeout 5s", "send --to h:1 f --timeout 5s"},
		{"send f -to=h:1 -json -j 4 -n 3", "send f --to=h:1 --json -j 4 --n 3"},
		{"send -to -timeout f", "send --to -timeout f"}, // a value stays a value
		{"send -bogus f", "send --bogus f"},             // pflag: unknown flag: --bogus
		{"send -jv 4 f", "send -jv 4 f"},                // one-letter flags run together
		{"send -help", "send --help"},
		{"send -- -to", "send -- -to"},
		{"tb exec -name x h0 ls -name -l", "tb exec --name x h0 ls -name -l"},
		{"-version", "version"},
		{"send - -to h", "send - --to h"},
	} {
		if got := strings.Join(NormalizeArgs(tree(), strings.Fields(c.in)), " "); got != c.want {
			t.Errorf("%q -> %q, want %q", c.in, got, c.want)
		}
	}
}

// exitErr is an error with its own exit status.
type exitErr struct{ code int }

func (e exitErr) Error() string { return "outcome pending" }
func (e exitErr) ExitCode() int { return e.code }

// Run prints errors on stderr and exits 2 for usage errors, 1 for failures.
func TestRunExitStatus(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"send", "-to", "x", "f"}, 0, ""},
		{[]string{"send", "-nosuch", "f"}, 2, "unknown flag: --nosuch"},
		{[]string{"send", "-timeout", "soon", "f"}, 2, "invalid argument"},
		{[]string{"send"}, 2, "accepts 1 arg"},
		{[]string{"nosuch"}, 2, "unknown command"},
		{[]string{"tb", "nosuch"}, 2, "unknown command"},
		{[]string{"tb", "exec", "h0"}, 2, "requires at least 2 arg"},
	} {
		var stdout, stderr bytes.Buffer
		root := tree()
		root.SetOut(&stdout)
		if code := Run(root, c.args, &stderr); code != c.code || !strings.Contains(stderr.String(), c.want) || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q", c.args, code, stderr.String(), stdout.String())
		}
		if c.code == 2 && !strings.Contains(stderr.String(), "--help' for usage") {
			t.Errorf("%v: stderr lacks the help hint: %q", c.args, stderr.String())
		}
	}
	failing := &cobra.Command{Use: "f", RunE: func(*cobra.Command, []string) error { return io.ErrUnexpectedEOF }}
	if code := Run(failing, nil, io.Discard); code != 1 {
		t.Fatalf("a failure exits %d", code)
	}
	pending := &cobra.Command{Use: "p", RunE: func(*cobra.Command, []string) error { return fmt.Errorf("send: %w", exitErr{3}) }}
	if code := Run(pending, nil, io.Discard); code != 3 {
		t.Fatalf("an error with ExitCode 3 exits %d", code)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"4096": 4096, "4k": 4 << 10, "4K": 4 << 10, "4KiB": 4 << 10, "8MiB": 8 << 20, "64M": 64 << 20, "1G": 1 << 30,
		"1g": 1 << 30, "2TiB": 2 << 40, "1T": 1 << 40, "1GB": 1e9, "1kB": 1000, "1.5KiB": 1536, " 2 MiB ": 2 << 20,
		"0": 0, "7B": 7, "1e6": 1e6, "4194304Ki": 1 << 32,
	} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "k", "-1", "1.5", "4x", "1Q", "NaN", "9223372036854775807", "0x10"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, accepted", in, got)
		}
	}
	// The limit 2^62 and just beyond.
	if n, err := ParseSize("4EiB"); err == nil {
		t.Errorf("4EiB accepted: %d", n)
	}
	if n, err := ParseSize("4194304T"); err != nil || n != 1<<62 {
		t.Errorf("2^62 bytes: %d, %v", n, err)
	}
	if _, err := ParseSize("4194305T"); err == nil {
		t.Error("2^62 + 1 TiB accepted")
	}
	for _, n := range []int64{0, 1000, 4096, 3 << 20, 1 << 30, 5 << 40} {
		if got, err := ParseSize(FormatSize(n)); err != nil || got != n {
			t.Errorf("FormatSize(%d) = %q reads back as %d, %v", n, FormatSize(n), got, err)
		}
	}
}

// SizeVar takes ParseSize's units within its bounds, the bounds included.
func TestSizeVar(t *testing.T) {
	var v int64
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	SizeVar(fs, &v, "bw", 64<<20, 1<<10, 1<<30, "")
	if v != 64<<20 || fs.Lookup("bw").DefValue != "64MiB" {
		t.Fatalf("default %d %q", v, fs.Lookup("bw").DefValue)
	}
	for in, ok := range map[string]bool{"1G": true, "1GiB": true, "1K": true, "1023": false, "1073741825": false, "2G": false, "x": false} {
		err := fs.Parse([]string{"--bw", in})
		if (err == nil) != ok {
			t.Errorf("--bw %s: %v", in, err)
		}
	}
	if err := fs.Parse([]string{"--bw", "1G"}); err != nil || v != 1<<30 {
		t.Fatalf("--bw 1G: %d, %v", v, err)
	}
}

// HelpMismatches finds a command whose help lacks a flag.
func TestHelpMismatchesFindsMissingFlag(t *testing.T) {
	newRoot := func(out *bytes.Buffer) *cobra.Command {
		r := tree()
		r.SetOut(out)
		r.SetErr(out)
		r.Commands()[0].SetHelpFunc(func(c *cobra.Command, _ []string) { c.Println("no flags here") })
		return r
	}
	problems, n := HelpMismatches(newRoot)
	if n != 5 || !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, "does not list --to") }) {
		t.Fatalf("walked %d, problems %q", n, problems)
	}
	good := func(out *bytes.Buffer) *cobra.Command { r := tree(); r.SetOut(out); r.SetErr(out); return r }
	if problems, _ := HelpMismatches(good); len(problems) > 0 {
		t.Fatalf("problems in a good tree: %q", problems)
	}
}
