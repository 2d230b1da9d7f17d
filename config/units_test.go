package config

import (
	"strings"
	"testing"
)

func TestDurationText(t *testing.T) {
	cases := map[string]Duration{"12us": 12_000, "1.5ms": 1_500_000, "200": 200, " 2s ": 2_000_000_000, "3µs": 3000}
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
	if s := Duration(12_000).String(); s != "12µs" {
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
