package config

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time span in nanoseconds that reads and writes as "200us", "1.5ms" or a
// plain integer of nanoseconds, in YAML, JSON and flags.
type Duration int64

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes d as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a Go duration ("12us", "1.5ms") or an integer of nanoseconds.
func (d *Duration) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(strings.ReplaceAll(s, "µ", "u"))
	if err != nil {
		return fmt.Errorf("%q is not a duration (want e.g. 12us, 1.5ms, or integer ns)", s)
	}
	*d = Duration(v)
	return nil
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

// DecodeYAML decodes data into out strictly: an unknown field is an error naming it and
// its line, so a typo in a config file never passes silently.
func DecodeYAML(data []byte, out any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(out); err != nil {
		if err.Error() == "EOF" {
			return nil // an empty file keeps the defaults
		}
		return err
	}
	return nil
}
