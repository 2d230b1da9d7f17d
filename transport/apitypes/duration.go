package apitypes

import (
	"fmt"
	"strings"
	"time"
)

// Duration is a time span that reads and writes in JSON as a Go duration string ("10s",
// "200us"), as smarttd's config writes its durations. It is the API's own type so that
// this package (and the Go client) depend on no package of the daemon's module.
type Duration int64

// String formats d like time.Duration, in ASCII ("12us", not "12µs").
func (d Duration) String() string {
	return strings.Replace(time.Duration(d).String(), "µs", "us", 1)
}

// MarshalText writes d as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a Go duration string ("10s", "1.5ms"; "0" is zero).
func (d *Duration) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "0" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(strings.ReplaceAll(s, "µ", "u"))
	if err != nil {
		return fmt.Errorf("%q is not a duration (want e.g. 12us, 1.5ms, 10s)", s)
	}
	*d = Duration(v)
	return nil
}
