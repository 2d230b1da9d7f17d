package config

import (
	"strings"
	"testing"
)

func TestDerivedValues(t *testing.T) {
	// The SMaRTT paper's reference point: 100 Gbit/s, 12 us -> 150,000 B, gamma 1.
	n := Network{LinkRate: 100e9, BaseRTT: 12_000, MTU: 4096}
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := n.BDP(); got != 150_000 {
		t.Fatalf("BDP = %d", got)
	}
	if got := n.Gamma(); got != 1 {
		t.Fatalf("gamma = %v", got)
	}
	if got := n.TargetRTT(); got != 18_000 {
		t.Fatalf("trtt = %d", got)
	}
	// 800 Gbit/s with the same RTT: 8x the BDP, gamma 8.
	n.LinkRate = 800e9
	if got := n.Gamma(); got != 8 {
		t.Fatalf("gamma = %v", got)
	}
	if got := n.SerializationTime(4096); got != 40 {
		t.Fatalf("serialisation = %d ns", got)
	}
}

func TestValidateNamesFields(t *testing.T) {
	err := Network{}.Validate()
	if err == nil {
		t.Fatal("zero network accepted")
	}
	for _, f := range []string{"link_rate", "base_rtt", "mtu"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not name %s", err, f)
		}
	}
}
