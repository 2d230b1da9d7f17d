package config

import (
	"net/netip"
	"strings"
	"testing"
)

// One size parser: binary for K/M/G/T and the IEC names, decimal for kB/MB/GB/TB.
func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"4096": 4096, "8MiB": 8 << 20, "4k": 4096, "4K": 4096, "1G": 1 << 30, "1g": 1 << 30, "64M": 64 << 20,
		"1GB": 1e9, "1MB": 1e6, "1kB": 1000, "2TiB": 2 << 40, "1.5KiB": 1536, "1e6": 1e6, " 16 KiB ": 16 << 10,
		"512B": 512, "1Gi": 1 << 30, "0": 0,
	} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"":                       "empty size",
		"8XB":                    `"8XB" is not a size (want bytes or e.g. 8MiB, 4k, 1G, 1GB)`,
		"-1":                     "must be in 0..2^62",
		"1.3B":                   "not a whole number",
		"8 EiB":                  "is not a size",
		"9999999999999999999999": "must be in 0..2^62",
		"5000000T":               "must be in 0..2^62",
	} {
		if _, err := ParseSize(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSize(%q): error %v, want %q", in, err, want)
		}
	}
	for _, n := range []int64{0, 1000, 4096, 8 << 20, 3 << 30, 1<<40 + 1} {
		if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
			t.Errorf("FormatSize(%d) = %q reads back as %d, %v", n, FormatSize(n), back, err)
		}
	}
	var s Size
	if err := s.Set("64M"); err != nil || s != 64<<20 || s.String() != "64MiB" {
		t.Errorf("Size.Set: %v %v", s, err)
	}
	if d, err := ParseDuration("1.5ms"); err != nil || d.Microseconds() != 1500 {
		t.Errorf("ParseDuration: %v %v", d, err)
	}
	if r, err := ParseRate("25Gbit"); err != nil || r != 25e9 {
		t.Errorf("ParseRate: %v %v", r, err)
	}
}

type decodeTarget struct {
	Listen netip.AddrPort `yaml:"listen"`
	Level  string         `yaml:"log_level"`
	UDP    struct {
		RecvBuffer int   `yaml:"recv_buffer" unit:"bytes"`
		DSCP       uint8 `yaml:"data_dscp"`
		Batch      int   `yaml:"batch_size"`
	} `yaml:"udp"`
	Transport struct {
		MinRTO Duration `yaml:"min_rto"`
		Budget int64    `yaml:"recv_budget" unit:"bytes"`
		Rate   Rate     `yaml:"link_rate"`
		Auth   struct {
			Peers []struct {
				Prefix netip.Prefix `yaml:"prefix"`
			} `yaml:"peers"`
		} `yaml:"auth"`
	} `yaml:"transport"`
	Size Size `yaml:"size"`
}

// Every problem in a document is reported at once, each with its key path, value, line
// and what is allowed; an unknown key names the key it most resembles.
func TestDecodeYAMLReportsEveryError(t *testing.T) {
	doc := `listen: 127.0.0.1
udp:
  recv_buffer: 8XB
  data_dscp: 300
  batch_sise: 64
transport:
  min_rtoo: 1ms
  min_rto: 5
  recv_budget: lots
  link_rate: fast
  auth:
    peers:
      - {prefix: 10.0.0.0/33}
size: 1.3B
bogus: 1
`
	var v decodeTarget
	err := DecodeYAML([]byte(doc), &v)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`listen: "127.0.0.1": ` + "", "want ADDRESS:PORT such as 0.0.0.0:23600 or [::]:23600 (line 1)",
		`udp.recv_buffer: "8XB" is not a size (want bytes or e.g. 8MiB, 4k, 1G, 1GB) (line 3)`,
		`udp.data_dscp: "300": must be in 0..255 (line 4)`,
		"udp.batch_sise: unknown key (line 5); did you mean batch_size?",
		"transport.min_rtoo: unknown key (line 7); did you mean min_rto?",
		"transport.min_rto: 5 has no unit; write 5us (or 5ms) (line 8)",
		`transport.recv_budget: "lots" is not a size`,
		`transport.link_rate: "fast" is not a rate`,
		`transport.auth.peers[0].prefix: netip.ParsePrefix("10.0.0.0/33"): prefix length out of range; want an address prefix such as 10.0.1.0/24 (line 13)`,
		`size: "1.3B" is 1.3 bytes, not a whole number (line 14)`,
		"bogus: unknown key (line 15); known keys here: listen, log_level, size, transport, udp",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "not found in type") || strings.Contains(err.Error(), "decodeTarget") {
		t.Errorf("error names a Go type:\n%v", err)
	}
}

// Fields tagged unit:"bytes" read sizes with units; others do not.
func TestDecodeYAMLSizesWithUnits(t *testing.T) {
	var v decodeTarget
	err := DecodeYAML([]byte("udp: {recv_buffer: 8MiB, batch_size: 64}\ntransport: {recv_budget: 2G}\nsize: 4k\n"), &v)
	if err != nil || v.UDP.RecvBuffer != 8<<20 || v.Transport.Budget != 2<<30 || v.Size != 4096 || v.UDP.Batch != 64 {
		t.Fatalf("got %+v, %v", v, err)
	}
	if err := DecodeYAML([]byte("udp: {batch_size: 4k}\n"), &v); err == nil || !strings.Contains(err.Error(), `udp.batch_size: "4k": want an integer`) {
		t.Fatalf("a count took a unit: %v", err)
	}
}
