package cli

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// HelpMismatches walks the command tree newRoot builds and runs "help CMD" and "CMD -h"
// for every command (a fresh tree each time): it returns each command whose two helps
// differ, miss one of its flags or its usage line, or print the usage twice, and the
// number of commands walked. The binaries' tests call it.
func HelpMismatches(newRoot func(out *bytes.Buffer) *cobra.Command) (problems []string, walked int) {
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		root := newRoot(&out)
		Prepare(root)
		root.SetArgs(NormalizeArgs(root, args))
		err := root.Execute()
		return out.String(), err
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		walked++
		path := strings.Fields(c.CommandPath())[1:]
		viaHelp, err1 := run(append([]string{"help"}, path...)...)
		viaFlag, err2 := run(append(path, "-h")...)
		switch {
		case err1 != nil || err2 != nil:
			problems = append(problems, fmt.Sprintf("%s: help: %v, -h: %v", c.CommandPath(), err1, err2))
		case viaHelp != viaFlag:
			problems = append(problems, fmt.Sprintf("%s: help and -h differ:\n%s\n---\n%s", c.CommandPath(), viaHelp, viaFlag))
		case strings.Count(viaFlag, "Usage:") != 1:
			problems = append(problems, fmt.Sprintf("%s -h prints its usage %d times", c.CommandPath(), strings.Count(viaFlag, "Usage:")))
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && !strings.Contains(viaFlag, "--"+f.Name+" ") && !strings.Contains(viaFlag, "--"+f.Name+"\n") {
				problems = append(problems, fmt.Sprintf("%s -h does not list --%s", c.CommandPath(), f.Name))
			}
		})
		for _, s := range c.Commands() {
			if !s.Hidden {
				walk(s)
			}
		}
	}
	walk(newRoot(&bytes.Buffer{}))
	return problems, walked
}
