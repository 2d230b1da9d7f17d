package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// GenDocs writes a man page (section 1) of root and of every command into dir, each
// listing the command's flags under OPTIONS, and with completions also dir/completion/
// NAME.bash, _NAME (zsh) and NAME.fish.
func GenDocs(root *cobra.Command, dir, source string, completions bool) error {
	Prepare(root)
	root.DisableAutoGenTag = true
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := genManTree(root, dir, source); err != nil {
		return fmt.Errorf("writing man pages: %w (is %s a writable directory?)", err, dir)
	}
	if !completions {
		return nil
	}
	cdir := filepath.Join(dir, "completion")
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return err
	}
	name := root.Name()
	for file, gen := range map[string]func(string) error{
		name + ".bash": func(p string) error { return root.GenBashCompletionFileV2(p, true) },
		"_" + name:     root.GenZshCompletionFile,
		name + ".fish": func(p string) error { return root.GenFishCompletionFile(p, true) },
	} {
		if err := gen(filepath.Join(cdir, file)); err != nil {
			return fmt.Errorf("writing %s: %w", file, err)
		}
	}
	return nil
}

// ManCmd is "man DIR": the man pages of every command into DIR.
func ManCmd(source string) *cobra.Command {
	return &cobra.Command{Use: "man DIR", Short: "write man pages of every command into DIR (section 1)",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := GenDocs(c.Root(), args[0], source, false); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "man pages in %s; e.g. man -l %s/%s.1\n", args[0], args[0], c.Root().Name())
			return nil
		}}
}

// GenDocsCmd is the hidden "gen-docs DIR": man pages and completion scripts for packaging.
func GenDocsCmd(source string) *cobra.Command {
	return &cobra.Command{Use: "gen-docs DIR", Short: "write man pages and bash, zsh and fish completions into DIR (for packages)",
		Args: cobra.ExactArgs(1), Hidden: true,
		RunE: func(c *cobra.Command, args []string) error {
			if err := GenDocs(c.Root(), args[0], source, true); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "man pages in %s, completions in %s\n", args[0], filepath.Join(args[0], "completion"))
			return nil
		}}
}
