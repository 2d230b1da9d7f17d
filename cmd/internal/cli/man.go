package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The man pages are written here rather than with cobra/doc, which links a Markdown
// renderer (blackfriday, md2man: 0.45 MB of the operator binary) to format help text
// that is plain text already.

// genManTree writes the man page of cmd and of each of its available subcommands into dir
// as "smartt-send.1" etc.
func genManTree(cmd *cobra.Command, dir, source string) error {
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() && !c.IsAdditionalHelpTopicCommand() {
			if err := genManTree(c, dir, source); err != nil {
				return err
			}
		}
	}
	name := strings.ReplaceAll(cmd.CommandPath(), " ", "-") + ".1"
	return os.WriteFile(filepath.Join(dir, name), manPage(cmd, source, manDate()), 0o644)
}

// manDate is the pages' date: $SOURCE_DATE_EPOCH's (reproducible packages) or today.
func manDate() time.Time {
	if s, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
		return time.Unix(s, 0).UTC()
	}
	return time.Now()
}

// manPage is cmd's man page in roff (section 1): NAME, SYNOPSIS, DESCRIPTION, OPTIONS
// (every flag with its default), the inherited options, and SEE ALSO.
func manPage(cmd *cobra.Command, source string, date time.Time) []byte {
	cmd.InitDefaultHelpFlag()
	var b bytes.Buffer
	dashed := strings.ReplaceAll(cmd.CommandPath(), " ", "-")
	fmt.Fprintf(&b, ".nh\n.TH %q \"1\" %q %q \"\"\n", strings.ToUpper(cmd.Root().Name()), date.Format("Jan 2006"), source)
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", roff(dashed), roff(cmd.Short))
	fmt.Fprintf(&b, ".SH SYNOPSIS\n\\fB%s\\fP\n", roff(cmd.UseLine()))
	desc := cmd.Long
	if desc == "" {
		desc = cmd.Short
	}
	b.WriteString(".SH DESCRIPTION\n")
	for _, para := range strings.Split(strings.TrimSpace(desc), "\n\n") {
		fmt.Fprintf(&b, ".PP\n%s\n", roffLines(para))
	}
	manFlags(&b, "OPTIONS", cmd.NonInheritedFlags())
	manFlags(&b, "OPTIONS INHERITED FROM PARENT COMMANDS", cmd.InheritedFlags())
	if cmd.Example != "" {
		fmt.Fprintf(&b, ".SH EXAMPLE\n.PP\n.nf\n%s\n.fi\n", roffLines(cmd.Example))
	}
	var see []string
	if p := cmd.Parent(); p != nil {
		see = append(see, strings.ReplaceAll(p.CommandPath(), " ", "-"))
	}
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() && !c.IsAdditionalHelpTopicCommand() {
			see = append(see, dashed+"-"+c.Name())
		}
	}
	if len(see) > 0 {
		b.WriteString(".SH SEE ALSO\n")
		for i, s := range see {
			sep := ","
			if i == len(see)-1 {
				sep = ""
			}
			fmt.Fprintf(&b, "\\fB%s\\fP(1)%s\n", roff(s), sep)
		}
	}
	return b.Bytes()
}

// manFlags writes a section listing fs's visible flags, one tagged paragraph each:
// "-s, --name=default" and the usage.
func manFlags(b *bytes.Buffer, title string, fs *pflag.FlagSet) {
	if !fs.HasAvailableFlags() {
		return
	}
	fmt.Fprintf(b, ".SH %s\n", title)
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		b.WriteString(".TP\n")
		if f.Shorthand != "" && f.ShorthandDeprecated == "" {
			fmt.Fprintf(b, "\\fB\\-%s\\fP, ", roff(f.Shorthand))
		}
		fmt.Fprintf(b, "\\fB\\-\\-%s\\fP", roff(f.Name))
		switch f.Value.Type() {
		case "bool":
		case "string":
			fmt.Fprintf(b, "=%s", roff(strconv.Quote(f.DefValue)))
		default:
			fmt.Fprintf(b, "=%s", roff(f.DefValue))
		}
		fmt.Fprintf(b, "\n%s\n", roffLines(f.Usage))
	})
}

// roff escapes s for a roff text line: backslashes, and hyphens (kept as hyphens, not
// typeset as dashes).
func roff(s string) string {
	return strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
}

// roffLines escapes a block of lines; a line starting with . or ' would be a request.
func roffLines(s string) string {
	lines := strings.Split(roff(s), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}
