package sim

import (
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport"
)

// TestRecoveryModesComplete runs 16-host cases with per-packet spraying (OPS) under every
// loss-recovery mode (transport.recovery.mode), with trimming and with drop-tail
// switches: a permutation (reordering, hardly any loss) and an 8:1 incast (hundreds of
// trims or drops), with SMaRTT and a fixed 50 us RTO; and the incast with NSCC and the
// adaptive RTO, whose window of one packet once left go-back-N resending out of PSN order
// after every timeout. Every flow must complete; the figures are logged (docs/engine.md).
func TestRecoveryModesComplete(t *testing.T) {
	incast := WorkloadConfig{Kind: "incast", Senders: 8, Receiver: 0, Size: 256 << 10}
	for _, c := range []struct {
		wl  WorkloadConfig
		cc  string
		rto int64
	}{
		{WorkloadConfig{Kind: "permutation", Size: 256 << 10}, "smartt", 50_000},
		{incast, "smartt", 50_000},
		{incast, "nscc", 0},
	} {
		wl := c.wl
		for _, trim := range []bool{true, false} {
			trim := trim
			for _, mode := range transport.RecoveryModes {
				sc := scenario(TopologyConfig{Kind: "fattree3", Hosts: 16, Radix: 4, LinkRate: 100e9,
					LinkLatency: 1000, SwitchLatency: 500, Queue: QueueConfig{BDPs: 0.5, Trim: &trim}}, wl)
				sc.Transport.CC = c.cc
				sc.Transport.LB = "ops"
				sc.Transport.Recovery.Mode = mode
				sc.Transport.FixedRTO = config.Duration(c.rto)
				s, err := New(sc)
				if err != nil {
					t.Fatal(err)
				}
				r := s.Run()
				t.Logf("%s %s trim=%v %s: %d/%d flows, completion/ideal %.3f, drops %d, trims %d, retx sack/nack/timeout %d/%d/%d",
					wl.Kind, c.cc, trim, mode, r.Completed, r.Flows, r.Ratio, r.Drops, r.Trims, r.RetxSack, r.RetxNack, r.RetxTimeout)
				if r.Completed != r.Flows || r.Failed != 0 {
					t.Errorf("%s trim=%v %s: %d of %d flows completed, %d failed", wl.Kind, trim, mode, r.Completed, r.Flows, r.Failed)
				}
			}
		}
	}
}

// TestRecoveryScenarioYAML: a scenario selects the mode under transport.recovery, as
// `smartt-lab sim run` reads it; a bad mode is refused naming the key.
func TestRecoveryScenarioYAML(t *testing.T) {
	doc := `name: t
topology: {kind: fattree3, hosts: 16, radix: 4, link_rate: 100Gbit}
workload: {kind: permutation, size: 65536}
transport: {lb: ops, recovery: {mode: gobackn}}
`
	sc, err := ParseScenario([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Transport.Recovery.Mode != transport.RecoveryGoBackN {
		t.Fatalf("mode %q", sc.Transport.Recovery.Mode)
	}
	if r := run(t, sc); r.Completed != r.Flows {
		t.Fatalf("%d of %d flows", r.Completed, r.Flows)
	}
	sc, err = ParseScenario([]byte(strings.Replace(doc, "gobackn", "roce", 1)))
	if err == nil {
		_, err = New(sc)
	}
	if err == nil || !strings.Contains(err.Error(), "recovery.mode") {
		t.Fatalf("bad mode: err = %v", err)
	}
}
