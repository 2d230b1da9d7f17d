package smarttd

import (
	"strings"
	"testing"
)

// A refused key leaves the rest decoded, so its range errors are reported beside the
// refusal, with every line number as written; what cannot be cut out cleanly is not
// validated (only the refusals are reported, as before).
func TestDecodeRest(t *testing.T) {
	for _, tc := range []struct {
		doc        string
		rest       bool
		want, gone []string
	}{
		{"udp:\n  recv_buffer: 8XB\n  data_dscp: 64\ntransport:\n  mtu: 70000\n  min_rtoo: 1ms\n", true,
			[]string{`udp.recv_buffer: "8XB" is not a size`, "(line 2)", "udp.data_dscp = 64", "transport.mtu = 70000", "transport.min_rtoo: unknown key (line 6)"}, nil},
		{"transport:\n  auth:\n    peers:\n      - prefix: 10.0.0.0/33\n        key_file: /x\n  mtu: 70000\n", false,
			[]string{"transport.auth.peers[0].prefix", "(line 4)"}, []string{"transport.mtu = 70000"}},
		{"udp: {recv_buffer: 8XB, data_dscp: 64}\ntransport: {mtu: 70000}\n", true, // the flow mapping's line goes whole
			[]string{`udp.recv_buffer: "8XB"`, "transport.mtu = 70000"}, []string{"udp.data_dscp"}},
		{"udp: [1, 2]\nlog_format: xml\n", true, []string{"udp: want a mapping of keys, not a sequence (line 1)", `log_format = "xml"`}, nil},
		{"- 1\n", false, []string{"want a mapping"}, nil},
	} {
		c := DefaultConfig()
		rest, derr := decodeRest([]byte(tc.doc), &c)
		_, err := Load([]byte(tc.doc))
		if derr == nil || err == nil || rest != tc.rest {
			t.Errorf("%q: rest %v (want %v), decode %v, load %v", tc.doc, rest, tc.rest, derr, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: %v\nlacks %q", tc.doc, err, w)
			}
		}
		for _, g := range tc.gone {
			if strings.Contains(err.Error(), g) {
				t.Errorf("%q: %v\nhas %q", tc.doc, err, g)
			}
		}
	}
	// Beyond maxRefusals only the refusals are reported (each cut costs a walk of the tree).
	var many strings.Builder
	many.WriteString("transport:\n  mtu: 70000\n")
	for i := range maxRefusals + 1 {
		many.WriteString("  bogus" + strings.Repeat("x", i) + ": 1\n")
	}
	c := DefaultConfig()
	if rest, err := decodeRest([]byte(many.String()), &c); rest || err == nil || strings.Count(err.Error(), "unknown key") != maxRefusals+1 {
		t.Fatalf("%d refusals: rest %v, %d reported", maxRefusals+1, rest, strings.Count(err.Error(), "unknown key"))
	}
}
