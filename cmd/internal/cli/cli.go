// Package cli is what the smartt and smartt-lab commands share: flags declared per command
// with pflag, one help style (cobra's), single-dash long flags accepted (-timeout as
// --timeout), usage errors with exit status 2, and man pages and shell completions
// generated from the command tree.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// UsageError is a command line the command cannot take: exit status 2.
type UsageError struct{ Err error }

// Error returns the parse error's text.
func (u UsageError) Error() string { return u.Err.Error() }

// Unwrap returns the parse error.
func (u UsageError) Unwrap() error { return u.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, a ...any) error { return UsageError{fmt.Errorf(format, a...)} }

// IsUsageError tells an unknown command or flag, or wrong arguments (exit status 2), from
// a failure (1).
func IsUsageError(err error) bool {
	var u UsageError
	return errors.As(err, &u) || strings.HasPrefix(err.Error(), "unknown command")
}

// RunFunc runs a leaf command with its positional arguments; its flags are parsed.
type RunFunc func(args []string, out io.Writer) error

// Leaf makes a command whose flags bind declares on the command's flag set; bind returns
// what runs once cobra has parsed them. args checks the positional arguments.
func Leaf(use, short, long string, args cobra.PositionalArgs, bind func(fs *pflag.FlagSet) RunFunc) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Long: long, Args: args}
	run := bind(c.Flags())
	c.RunE = func(c *cobra.Command, args []string) error { return run(args, c.OutOrStdout()) }
	return c
}

// Group makes a command that only holds subcommands: without one it prints its help, with
// an unknown one it fails with a usage error.
func Group(use, short, long string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Long: long, Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 || (len(args) == 1 && args[0] == "help") {
				return c.Help()
			}
			return Usagef("unknown command %q for %q: run \"%s -h\" for its commands", args[0], c.CommandPath(), c.CommandPath())
		}}
	c.AddCommand(subs...)
	return c
}

// NoInterspersed makes c stop reading flags at its first positional argument: what follows
// is the argument list of a command it runs (testbed exec NODE ls -l).
func NoInterspersed(c *cobra.Command) *cobra.Command {
	c.Flags().SetInterspersed(false)
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[noInterspersed] = "true"
	return c
}

const noInterspersed = "cli.no-interspersed"

// Prepare sets the conventions on root's tree: errors returned, not printed (Run prints
// them on stderr), no usage dump on failure, flag and argument errors as UsageError. It
// is idempotent.
func Prepare(root *cobra.Command) {
	if root.Annotations[prepared] != "" {
		return
	}
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[prepared] = "true"
	root.SilenceUsage, root.SilenceErrors = true, true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return UsageError{err} })
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if check := c.Args; check != nil {
			c.Args = func(c *cobra.Command, args []string) error {
				if err := check(c, args); err != nil {
					return UsageError{err}
				}
				return nil
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

const prepared = "cli.prepared"

// Run runs root with args (os.Args[1:]): errors go to stderr prefixed with the command's
// name; it returns the exit status: 0, 1 on failure, 2 on a usage error, or the status
// of an error with an ExitCode method (send's "outcome pending").
func Run(root *cobra.Command, args []string, stderr io.Writer) int {
	Prepare(root)
	root.SetArgs(NormalizeArgs(root, args))
	c, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", root.Name(), err)
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		return coded.ExitCode()
	}
	if IsUsageError(err) {
		if c == nil {
			c = root
		}
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", c.CommandPath())
		return 2
	}
	return 1
}

// Main runs root with the process's arguments and exits with Run's status.
func Main(root *cobra.Command) {
	os.Exit(Run(root, os.Args[1:], os.Stderr))
}

// NormalizeArgs is the compatibility shim for the flag package's spelling that scripts
// and docs use: a single-dash long flag (-timeout 5s, -out=DIR, -j 4) becomes the
// double-dash one pflag reads (--timeout 5s), when the command reached so far declares a
// flag of that name; -help becomes --help; a leading -version becomes the version
// command. Flag values, arguments after "--" and the arguments of a command that does
// not intersperse flags (testbed exec NODE CMD -x) are left alone.
func NormalizeArgs(root *cobra.Command, args []string) []string {
	out := slices.Clone(args)
	if len(out) > 0 && out[0] == "-version" {
		if _, _, err := root.Find([]string{"version"}); err == nil {
			out[0] = "version"
		}
	}
	cmd, positional := root, false
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		if a == "-" || !strings.HasPrefix(a, "-") {
			if !positional {
				if s := subcommand(cmd, a); s != nil {
					cmd = s
					continue
				}
			}
			positional = true
			if cmd.Annotations[noInterspersed] != "" {
				break
			}
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "help" {
			out[i] = "--help"
			continue
		}
		f := lookup(cmd, name)
		if !strings.HasPrefix(a, "--") {
			short := len(name) == 1 && shorthand(cmd, name) != nil
			switch {
			case f != nil && !short:
				out[i] = "-" + a
			case short:
				f = shorthand(cmd, name)
			case len(name) > 1 && !shorthands(cmd, name):
				out[i] = "-" + a // unknown: pflag says "unknown flag: --name"
			default:
				f = nil // one-letter flags run together (-qv): pflag reads them
			}
		}
		if f != nil && !hasValue && f.NoOptDefVal == "" {
			i++ // the flag's value, whatever it looks like
		}
	}
	return out
}

// subcommand returns c's subcommand called name (or an alias), or nil.
func subcommand(c *cobra.Command, name string) *cobra.Command {
	for _, s := range c.Commands() {
		if s.Name() == name || slices.Contains(s.Aliases, name) {
			return s
		}
	}
	return nil
}

// lookup finds a long flag of c, its own or inherited.
func lookup(c *cobra.Command, name string) *pflag.Flag {
	if f := c.Flags().Lookup(name); f != nil {
		return f
	}
	return c.InheritedFlags().Lookup(name)
}

// shorthand finds a one-letter flag of c, its own or inherited.
func shorthand(c *cobra.Command, name string) *pflag.Flag {
	if f := c.Flags().ShorthandLookup(name); f != nil {
		return f
	}
	return c.InheritedFlags().ShorthandLookup(name)
}

// shorthands reports whether every letter of s is a one-letter flag of c (-qv) or h.
func shorthands(c *cobra.Command, s string) bool {
	for _, r := range s {
		if r != 'h' && shorthand(c, string(r)) == nil {
			return false
		}
	}
	return true
}

// SetVersion gives root a --version flag that prints line. It replaces cobra's Version
// field: that prints through text/template, whose reflection keeps every exported method
// of every linked type in the binary (megabytes: the linker's dead-code elimination stops).
func SetVersion(root *cobra.Command, line string) {
	show := root.Flags().Bool("version", false, "print the version and exit")
	root.RunE = func(c *cobra.Command, args []string) error {
		if *show {
			fmt.Fprintln(c.OutOrStdout(), line)
			return nil
		}
		return c.Help()
	}
}
