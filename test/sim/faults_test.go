package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/config"
)

func failureScenario(f ...FailureConfig) *Scenario {
	sc := scenario(TopologyConfig{Kind: "fattree2", Hosts: 32, Radix: 8, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 500},
		WorkloadConfig{Kind: "permutation", Size: 512 << 10})
	sc.Transport.MaxRetransmits = 255
	sc.Transport.MinRTO, sc.Transport.InitialRTO = 50_000, 50_000
	sc.Transport.LB = "ops"
	sc.Failures = f
	return sc
}

// A link that goes down loses the packets hashed onto it until routing converges; after
// that nothing more is lost there, and every flow still completes.
func TestLinkDownAndConvergence(t *testing.T) {
	count := func(conv int64) *Result {
		sc := failureScenario(FailureConfig{Kind: "down", A: "tor0", B: "spine0", At: 5_000})
		sc.RoutingConvergence = configDuration(conv)
		return run(t, sc)
	}
	fast, slow := count(0), count(20_000)
	for _, r := range []*Result{fast, slow} {
		if r.Completed != r.Flows {
			t.Fatalf("%d of %d flows completed", r.Completed, r.Flows)
		}
	}
	if slow.LinkDrops == 0 {
		t.Fatal("no packets lost on the dead link before routing converged")
	}
	if fast.LinkDrops >= slow.LinkDrops {
		t.Fatalf("instant convergence lost %d packets, 20 us convergence %d", fast.LinkDrops, slow.LinkDrops)
	}
	if slow.RetxTimeout+slow.RetxSack == 0 {
		t.Fatal("lost packets were never retransmitted by timeout or SACK")
	}
}

// A link brought back up is used again: the same failure with a recovery loses no more
// than without, and the run completes.
func TestLinkUpAgainAndDegraded(t *testing.T) {
	r := run(t, failureScenario(FailureConfig{Kind: "down", A: "tor0", B: "spine0", At: 5_000, Until: 30_000}))
	if r.Completed != r.Flows {
		t.Fatalf("%d of %d flows", r.Completed, r.Flows)
	}
	// Every ToR uplink of tor0 degraded to a quarter: flows leaving tor0 slow down.
	var fs []FailureConfig
	for _, sp := range []string{"spine0", "spine1", "spine2", "spine3"} {
		fs = append(fs, FailureConfig{Kind: "degrade", A: "tor0", B: sp, Rate: 25e9})
	}
	base := run(t, failureScenario())
	deg := run(t, failureScenario(fs...))
	if deg.Completion < base.Completion*2 {
		t.Fatalf("degraded uplinks: completion %d ns, healthy %d ns", deg.Completion, base.Completion)
	}
}

// A flaky link drops packets in bursts, and the transport recovers them.
func TestFlakyLink(t *testing.T) {
	r := run(t, failureScenario(FailureConfig{Kind: "flaky", A: "tor0", B: "spine0", Gap: 10_000, Burst: 2_000}))
	if r.FlakyDrops == 0 || r.Completed != r.Flows {
		t.Fatalf("flaky drops %d, %d of %d flows", r.FlakyDrops, r.Completed, r.Flows)
	}
}

func TestFailureConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		f    FailureConfig
		want string
	}{
		{FailureConfig{Kind: "down", A: "tor0", B: "nope"}, "no node"},
		{FailureConfig{Kind: "down", A: "tor0", B: "tor1"}, "no link"},
		{FailureConfig{Kind: "melt", A: "tor0", B: "spine0"}, "kind"},
		{FailureConfig{Kind: "flaky", A: "tor0", B: "spine0"}, "gap"},
		{FailureConfig{Kind: "degrade", A: "tor0", B: "spine0", Rate: 1e12}, "rate"},
	} {
		_, err := New(failureScenario(tc.f))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want it to mention %q", tc.f, err, tc.want)
		}
	}
}

// Every shipped scenario parses strictly and builds (running them is the CLI's job).
func TestScenarioFiles(t *testing.T) {
	files, _ := filepath.Glob("scenarios/*.yaml")
	if len(files) < 8 {
		t.Fatalf("%d scenario files", len(files))
	}
	for _, f := range files {
		sc, err := LoadScenario(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := New(sc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if _, err := ParseScenario([]byte("topology: {kind: single, hosts: 2, bogus: 1}")); err == nil {
		t.Fatal("unknown field accepted")
	}
	sc, err := ParseScenario([]byte("topology: {kind: single, hosts: 4}\nworkload: {kind: incast, size: 64KiB}\ntransport: {mtu: 1024, min_rto: 20us, max_retransmits: 255}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Transport.MTU != 1024 || sc.Transport.MinRTO != 20_000 || sc.Workload.Size != 64<<10 {
		t.Fatalf("decoded %+v", sc.Transport)
	}
	s, err := New(sc)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Run(); r.Completed != 3 {
		t.Fatalf("%d of 3 flows", r.Completed)
	}
	dir := t.TempDir()
	r := s.Run()
	for _, name := range []string{"fct.png", "fct.svg"} {
		if err := PlotFCTCDF(filepath.Join(dir, name), r); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() < 1000 {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

func configDuration(ns int64) config.Duration { return config.Duration(ns) }

// TestAuthRefused: the simulator carries packet headers only, so it refuses packet
// authentication with an error naming the field, instead of failing every packet.
func TestAuthRefused(t *testing.T) {
	sc, err := ParseScenario([]byte("topology: {kind: single, hosts: 2}\nworkload: {kind: incast, size: 4KiB}\n" +
		"transport: {auth: {mode: auth, key: " + strings.Repeat("ab", 32) + "}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(sc); err == nil || !strings.Contains(err.Error(), "transport.auth.mode = auth") {
		t.Fatalf("New: %v", err)
	}
}
