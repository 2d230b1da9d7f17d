package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time span in nanoseconds that reads and writes with a unit: "200us",
// "1.5ms", "10s" (Go's time.ParseDuration units), in YAML, JSON and flags. A number
// without a unit is an error naming the unit to add ("5 has no unit; write 5us (or
// 5ms)"), except 0, which is zero in every unit.
type Duration int64

// String formats d like time.Duration, in ASCII ("12us", not "12µs"), so that YAML,
// JSON, flags and messages agree and the value reads back.
func (d Duration) String() string {
	return strings.Replace(time.Duration(d).String(), "µs", "us", 1)
}

// MarshalText writes d as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a Go duration ("12us", "1.5ms", "0"); a bare number other than 0
// is an error that suggests the unit.
func (d *Duration) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if bareNumber(s) {
		if f, err := strconv.ParseFloat(s, 64); err == nil && f == 0 {
			*d = 0
			return nil
		}
		return fmt.Errorf("%s has no unit; write %sus (or %sms)", s, s, s)
	}
	v, err := time.ParseDuration(strings.ReplaceAll(s, "µ", "u"))
	if err != nil {
		return fmt.Errorf("%q is not a duration (want e.g. 12us, 1.5ms, 10s)", s)
	}
	*d = Duration(v)
	return nil
}

// UnmarshalYAML reads a scalar as UnmarshalText does; DecodeYAML names the key of a
// value it refuses.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	return unmarshalScalar(n, "a duration such as 200us", d.UnmarshalText)
}

// bareNumber reports whether s is a decimal number without a unit: [+-]digits[.digits][e[+-]digits].
func bareNumber(s string) bool {
	s = strings.TrimLeft(s, "+-")
	digits := 0
	i := 0
	for ; i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.'); i++ {
		if s[i] != '.' {
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	return i == len(s)
}

// valueError is a scalar a config type refused, with its position in the document so
// that DecodeYAML can name its key.
type valueError struct {
	line, column int
	err          error
}

// Error implements error.
func (e *valueError) Error() string { return fmt.Sprintf("line %d: %v", e.line, e.err) }

// Unwrap returns the refusal.
func (e *valueError) Unwrap() error { return e.err }

func unmarshalScalar(n *yaml.Node, want string, text func([]byte) error) error {
	if n.Kind != yaml.ScalarNode {
		return &valueError{n.Line, n.Column, fmt.Errorf("want %s, not a %s", want, kindName(n.Kind))}
	}
	if err := text([]byte(n.Value)); err != nil {
		return &valueError{n.Line, n.Column, err}
	}
	return nil
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "sequence"
	case yaml.AliasNode:
		return "alias"
	}
	return "document"
}

// Rate is a link rate in bits per second that reads as "100Gbit", "800G", "25Mbit/s",
// "1e11" or a plain integer of bits per second.
type Rate int64

var rateUnits = []struct {
	suffix string
	mult   float64
}{{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1},
	{"t", 1e12}, {"g", 1e9}, {"m", 1e6}, {"k", 1e3}}

// String formats r with the largest unit that divides it.
func (r Rate) String() string {
	for _, u := range rateUnits[:4] {
		if int64(r)%int64(u.mult) == 0 && int64(r) != 0 {
			return strconv.FormatInt(int64(r)/int64(u.mult), 10) + strings.ToUpper(u.suffix[:1]) + "bit"
		}
	}
	return strconv.FormatInt(int64(r), 10) + "bit"
}

// MarshalText writes r as e.g. "100Gbit".
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a rate in bits per second with an optional unit.
func (r *Rate) UnmarshalText(b []byte) error {
	s := strings.ToLower(strings.TrimSpace(string(b)))
	s = strings.TrimSuffix(s, "/s")
	if strings.HasSuffix(s, "bps") {
		s = strings.TrimSuffix(s, "bps") + "bit"
	}
	mult := 1.0
	for _, u := range rateUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsInf(v*mult, 0) || v*mult > math.MaxInt64 {
		return fmt.Errorf("%q is not a rate (want e.g. 100Gbit, 800G, 25Mbit/s)", string(b))
	}
	*r = Rate(math.Round(v * mult))
	return nil
}

// UnmarshalYAML reads a scalar as UnmarshalText does; DecodeYAML names the key of a
// value it refuses.
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	return unmarshalScalar(n, "a rate such as 100Gbit", r.UnmarshalText)
}
