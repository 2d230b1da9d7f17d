package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// A man page lists every flag with its default, escapes roff's specials (a line that
// starts with a dot, backslashes, hyphens), and names its parent and subcommands.
func TestManPage(t *testing.T) {
	root := tree()
	root.Short = "the t tool"
	send, _, _ := root.Find([]string{"send"})
	send.Short = "send a file"
	send.Long = "send sends FILE.\n.dot at the start of a line, a \\ backslash\n\nsecond paragraph"
	send.Flags().String("path", `C:\x`, "where")
	Prepare(root)
	got := string(manPage(send, "t 1", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)))
	for _, want := range []string{
		".TH \"T\" \"1\" \"Nov 2026\" \"t 1\"",
		".SH NAME\nt\\-send \\- send a file\n",
		".SH SYNOPSIS\n\\fBt send FILE [flags]\\fP",
		"\\&.dot at the start", "a \\e backslash", ".PP\nsecond paragraph",
		".SH OPTIONS", "\\fB\\-\\-to\\fP=\"\"\n", "\\fB\\-\\-timeout\\fP=0s\n", "\\fB\\-\\-json\\fP\n",
		"\\fB\\-j\\fP, \\fB\\-\\-jobs\\fP=1\n", "\\fB\\-\\-path\\fP=\"C:\\e\\ex\"", "\\fB\\-h\\fP, \\fB\\-\\-help\\fP\nhelp for send",
		".SH SEE ALSO\n\\fBt\\fP(1)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("man page lacks %q:\n%s", want, got)
		}
	}
	top := string(manPage(root, "t 1", time.Now()))
	if !strings.Contains(top, "\\fBt\\-send\\fP(1),\n") || !strings.Contains(top, "\\fBt\\-tb\\fP(1)") {
		t.Errorf("root page does not name its subcommands:\n%s", top)
	}
	var hidden pflag.FlagSet
	hidden.String("secret", "", "")
	hidden.MarkHidden("secret")
	c := &cobra.Command{Use: "x"}
	c.Flags().AddFlagSet(&hidden)
	if p := string(manPage(c, "", time.Now())); strings.Contains(p, "secret") {
		t.Errorf("hidden flag listed:\n%s", p)
	}
}
