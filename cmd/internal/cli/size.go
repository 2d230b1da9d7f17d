package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/smartt-transport/smartt/config"
)

// ParseSize reads a byte count as config.ParseSize does (binary K, M, G, T and KiB..TiB,
// decimal kB..TB): the command line takes the sizes the config files take.
func ParseSize(s string) (int64, error) { return config.ParseSize(s) }

// FormatSize writes n with the largest binary unit that divides it ("8MiB", "4KiB",
// "1000"), so that ParseSize reads it back.
func FormatSize(n int64) string { return config.FormatSize(n) }

// sizeValue is a size flag (pflag.Value) bounded to min..max bytes.
type sizeValue struct {
	p        *int64
	min, max int64
}

// SizeVar declares a size flag on fs (ParseSize's units) whose value must be in min..max.
func SizeVar(fs *pflag.FlagSet, p *int64, name string, def, min, max int64, usage string) {
	*p = def
	fs.Var(&sizeValue{p, min, max}, name, usage)
}

// String formats the size as FormatSize does.
func (v *sizeValue) String() string { return FormatSize(*v.p) }

// Type names the value's type in help.
func (v *sizeValue) Type() string { return "size" }

// Set parses a size and checks its range.
func (v *sizeValue) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return err
	}
	if n < v.min || n > v.max {
		return fmt.Errorf("%q: must be in %s..%s", s, FormatSize(v.min), FormatSize(v.max))
	}
	*v.p = n
	return nil
}
