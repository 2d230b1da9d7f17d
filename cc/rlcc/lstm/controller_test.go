package lstm

import (
	"strings"
	"testing"
)

// A marshalled LSTM parses back to the same weights; a wrong format, shape, parameter
// count, unknown field or non-finite weight is refused, naming it.
func TestLSTMFileRoundTripAndErrors(t *testing.T) {
	m := NewLSTM(4)
	b, err := Marshal(m, map[string]any{"generator": "test"})
	if err != nil {
		t.Fatal(err)
	}
	got, meta, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Theta != m.Theta || meta["generator"] != "test" {
		t.Fatal("round trip changed the network")
	}
	s := string(b)
	for name, bad := range map[string]string{
		"format":      strings.Replace(s, FormatLSTM, "smartt-rlcc-lstm/2", 1),
		"layers":      strings.Replace(s, `"layers": [`, `"layers": [3,`, 1),
		"parameters":  strings.Replace(s, `"theta": [`, `"theta": [1,`, 1),
		"unknown":     strings.Replace(s, `"format"`, `"extra": 1, "format"`, 1),
		"not finite":  strings.Replace(s, `"theta": [`, `"theta": [1e999,`, 1),
		"not an LSTM": `{"format": "smartt-rlcc-lstm/1"}`,
	} {
		if _, _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
