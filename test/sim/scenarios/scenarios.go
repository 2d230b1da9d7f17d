// Package scenarios embeds the simulator's shipped scenario files, so commands can name
// them ("permutation_128") wherever the binary runs, e.g. on a batch cluster's nodes.
package scenarios

import (
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

//go:embed *.yaml
var files embed.FS

// Names lists the shipped scenarios, without the .yaml suffix, sorted.
func Names() []string {
	ents, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	slices.Sort(out)
	return out
}

// Read returns the shipped scenario called name (with or without .yaml).
func Read(name string) ([]byte, error) {
	b, err := files.ReadFile(strings.TrimSuffix(name, ".yaml") + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no shipped scenario %q (one of %s)", name, strings.Join(Names(), ", "))
	}
	return b, nil
}
