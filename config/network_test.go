package config

import (
	"strings"
	"testing"
)

func TestDerivedValues(t *testing.T) {
	// The SMaRTT paper's reference point: 100 Gbit/s, 12 us -> 150,000 B (ReferenceBDP).
	n := Network{LinkRate: 100e9, BaseRTT: 12_000, MTU: 4096}
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := n.BDP(); got != ReferenceBDP {
		t.Fatalf("BDP = %d", got)
	}
	// 800 Gbit/s with the same RTT: 8x the BDP.
	n.LinkRate = 800e9
	if got := n.BDP(); got != 8*ReferenceBDP {
		t.Fatalf("BDP at 800 Gbit/s = %d", got)
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
