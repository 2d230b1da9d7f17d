package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// sizeUnits are the units ParseSize reads, longest first. The letters without "B" and the
// IEC names are binary (as dd, ulimit and the kernel's memparse read them: 4k = 4096); the
// SI names with "B" are decimal (1GB = 10^9 bytes). docs/daemon.md, "Sizes".
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

// ParseSize reads a byte count: a plain integer ("4096") or a number with a unit, binary
// for K, M, G, T, KiB, MiB, GiB, TiB (and Ki..Ti), decimal for kB, MB, GB, TB; units are
// case-insensitive ("8MiB" = 8388608, "4k" = 4096, "1G" = 1073741824, "1GB" = 10^9,
// "1.5KiB" = 1536). The result must be a whole number of bytes in 0..2^62.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return 0, fmt.Errorf("empty size (want bytes or e.g. 8MiB, 4k, 1G)")
	}
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	bad := fmt.Errorf("%q is not a size (want bytes or e.g. 8MiB, 4k, 1G, 1GB)", s)
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		if n < 0 || n > (1<<62)/mult {
			return 0, fmt.Errorf("%q: must be in 0..2^62 bytes", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) {
		return 0, bad
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

// FormatSize writes n with the largest binary unit that divides it ("8MiB", "4KiB",
// "1000"), so that it reads back with ParseSize.
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

// HumanSize writes n rounded to three significant figures in binary units ("4.5 GiB"),
// for messages and logs (not for reading back).
func HumanSize(n int64) string {
	f := float64(n)
	for _, u := range []string{"B", "KiB", "MiB", "GiB", "TiB"} {
		if math.Abs(f) < 1024 || u == "TiB" {
			if u == "B" {
				return fmt.Sprintf("%d B", n)
			}
			return fmt.Sprintf("%.3g %s", f, u)
		}
		f /= 1024
	}
	return ""
}

// Size is a byte count that reads with ParseSize's units in YAML, JSON and flags and
// writes as FormatSize does.
type Size int64

// String formats s as FormatSize does.
func (s Size) String() string { return FormatSize(int64(s)) }

// Set parses a flag value (flag.Value, pflag.Value).
func (s *Size) Set(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	*s = Size(n)
	return nil
}

// Type names the flag value's type (pflag.Value).
func (s *Size) Type() string { return "size" }

// MarshalText writes s as e.g. "8MiB".
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a size with ParseSize.
func (s *Size) UnmarshalText(b []byte) error { return s.Set(string(b)) }

// UnmarshalYAML reads a scalar as UnmarshalText does; DecodeYAML names the key of a value
// it refuses.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	return unmarshalScalar(n, "a size such as 8MiB", s.UnmarshalText)
}

// ParseDuration reads a duration as the config files do ("200us", "1.5ms", "10s"; a bare
// number other than 0 is an error naming the unit to add).
func ParseDuration(s string) (time.Duration, error) {
	var d Duration
	err := d.UnmarshalText([]byte(s))
	return time.Duration(d), err
}

// ParseRate reads a rate in bits per second as the config files do ("100Gbit", "800G",
// "25Mbit/s", "1e11": rates are decimal, as link rates are).
func ParseRate(s string) (int64, error) {
	var r Rate
	err := r.UnmarshalText([]byte(s))
	return int64(r), err
}
