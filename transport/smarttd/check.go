package smarttd

import (
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/smartt-transport/smartt/config"
)

// CheckFile is smarttd -check-config FILE and smartt check --config FILE: it reads and
// validates the file as the daemon would start with it and writes the effective config
// and its worst-case memory (WriteCheck), or returns every error, prefixed with path.
func CheckFile(out io.Writer, path string, cg CgroupFS) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	cfg, err := Load(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return WriteCheck(out, path, &cfg, cg)
}

// WriteCheck writes cfg (read from name) as the daemon would run it: the effective config
// with the defaults filled in, and its worst-case memory against the memory limit it
// would run under (cg); or it returns why the daemon would refuse to start.
func WriteCheck(out io.Writer, name string, cfg *Config, cg CgroupFS) error {
	b, err := CheckMemory(cfg, cg)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	y, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "# %s: valid; the effective config (defaults filled in):\n%s", name, y)
	fmt.Fprintf(out, "# worst-case memory %s:\n", config.HumanSize(b.Total))
	for _, it := range b.Items {
		fmt.Fprintf(out, "#   %-28s %10s  %s\n", it.Name, config.HumanSize(it.Bytes), it.How)
	}
	return nil
}
