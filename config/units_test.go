package config

import (
	"strings"
	"testing"
)

func TestDurationText(t *testing.T) {
	cases := map[string]Duration{"12us": 12_000, "1.5ms": 1_500_000, "200ns": 200, " 2s ": 2_000_000_000, "3µs": 3000,
		"0": 0, "0.0": 0, "0s": 0}
	for in, want := range cases {
		var d Duration
		if err := d.UnmarshalText([]byte(in)); err != nil || d != want {
			t.Errorf("%q: got %d, %v; want %d", in, d, err, want)
		}
	}
	var d Duration
	if err := d.UnmarshalText([]byte("fast")); err == nil {
		t.Error("\"fast\" parsed as a duration")
	}
	// A number without a unit used to be nanoseconds ("min_rto: 5" was 5 ns): now it is an
	// error that says which unit to add.
	for in, want := range map[string]string{"5": "5 has no unit; write 5us (or 5ms)", "200": "200 has no unit",
		"1.5": "1.5 has no unit; write 1.5us", "-3": "-3 has no unit", "1e6": "1e6 has no unit"} {
		d = 7
		if err := d.UnmarshalText([]byte(in)); err == nil || !strings.Contains(err.Error(), want) || d != 7 {
			t.Errorf("%q: got %d, %v; want the error %q", in, d, err, want)
		}
	}
	if s := Duration(12_000).String(); s != "12us" {
		t.Errorf("String = %q", s)
	}
}

func TestRateText(t *testing.T) {
	cases := map[string]Rate{"100Gbit": 100e9, "800G": 800e9, "25Mbit/s": 25e6, "1e11": 1e11,
		"10gbps": 10e9, "1500": 1500, "2.5Gbit": 2.5e9}
	for in, want := range cases {
		var r Rate
		if err := r.UnmarshalText([]byte(in)); err != nil || r != want {
			t.Errorf("%q: got %d, %v; want %d", in, r, err, want)
		}
	}
	for _, bad := range []string{"", "fast", "-1G", "1e30G"} {
		var r Rate
		if err := r.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("%q parsed as %d", bad, r)
		}
	}
	if s := Rate(100e9).String(); s != "100Gbit" {
		t.Errorf("String = %q", s)
	}
}

func TestDecodeYAMLStrict(t *testing.T) {
	var v struct {
		RTT  Duration `yaml:"rtt"`
		Rate Rate     `yaml:"rate"`
	}
	if err := DecodeYAML([]byte("rtt: 12us\nrate: 100Gbit\n"), &v); err != nil || v.RTT != 12_000 || v.Rate != 100e9 {
		t.Fatalf("got %+v, %v", v, err)
	}
	err := DecodeYAML([]byte("rtt: 12us\nrat: 1G\n"), &v)
	if err == nil || !strings.Contains(err.Error(), "rat") {
		t.Fatalf("unknown field: err = %v", err)
	}
	if err := DecodeYAML(nil, &v); err != nil {
		t.Fatalf("empty: %v", err)
	}
}

// A refused duration or rate is named by its key path, and a bare integer duration gets
// the unit suggestion (regression: "min_rto: 5" was accepted as 5 ns).
func TestDecodeYAMLNamesTheField(t *testing.T) {
	type inner struct {
		MinRTO Duration   `yaml:"min_rto"`
		Hops   []Duration `yaml:"hops"`
		Rate   Rate       `yaml:"rate"`
	}
	var v struct {
		Timeout   Duration `yaml:"shutdown_timeout"`
		Transport inner    `yaml:"transport"`
	}
	for doc, want := range map[string]string{
		"transport:\n  min_rto: 5\n":      "transport.min_rto: 5 has no unit; write 5us (or 5ms) (line 2)",
		"shutdown_timeout: 10\n":          "shutdown_timeout: 10 has no unit; write 10us (or 10ms) (line 1)",
		"transport: {hops: [1us, 2]}\n":   "transport.hops[1]: 2 has no unit",
		"transport:\n  min_rto: soon\n":   `transport.min_rto: "soon" is not a duration`,
		"transport:\n  rate: fast\n":      `transport.rate: "fast" is not a rate`,
		"transport:\n  min_rto: {a: 1}\n": "transport.min_rto: want a duration such as 200us, not a mapping",
	} {
		err := DecodeYAML([]byte(doc), &v)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to contain %q", doc, err, want)
		}
	}
	if err := DecodeYAML([]byte("shutdown_timeout: 0\ntransport: {min_rto: 5us, hops: [0, 1ms]}\n"), &v); err != nil ||
		v.Timeout != 0 || v.Transport.MinRTO != 5000 || len(v.Transport.Hops) != 2 || v.Transport.Hops[1] != 1e6 {
		t.Fatalf("got %+v, %v", v, err)
	}
}
