package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// ParseSize reads a byte count: a plain integer ("4096") or a number with a unit, binary
// for K, M, G, T, KiB, MiB, GiB, TiB (and Ki..Ti), decimal for kB, MB, GB, TB; units are
// case-insensitive ("8MiB" = 8388608, "4k" = 4096, "1G" = 1073741824, "1GB" = 10^9). The
// result is a whole number of bytes in 0..2^62. It reads what config.ParseSize reads: the
// command line takes the sizes the config files take.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if t == "" || err != nil || math.IsNaN(f) {
		return 0, fmt.Errorf("%q is not a size (want bytes or e.g. 8MiB, 4k, 1G, 1GB)", s)
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil { // exact above 2^53
		if n < 0 || n > (1<<62)/mult {
			return 0, fmt.Errorf("%q: must be in 0..2^62 bytes", s)
		}
		return n * mult, nil
	}
	v := f * float64(mult)
	if v < 0 || v > 1<<62 {
		return 0, fmt.Errorf("%q: must be in 0..2^62 bytes", s)
	}
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("%q is %g bytes, not a whole number", s, v)
	}
	return int64(v), nil
}

// sizeUnits are ParseSize's units, longest suffix first.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"ki", 1 << 10}, {"mi", 1 << 20}, {"gi", 1 << 30}, {"ti", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1},
}

// FormatSize writes n with the largest binary unit that divides it ("8MiB", "4KiB",
// "1000"), so that ParseSize reads it back.
func FormatSize(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.m == 0 {
			return strconv.FormatInt(n/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}

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
