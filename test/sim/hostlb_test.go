package sim

import (
	"strings"
	"testing"
)

// TestHostLB: host_lb gives the hosts it lists another balancer. Listing every host is
// the same run as that balancer for all; listing none leaves transport.lb's run as it
// was; listing some gives a run unlike either. Bad lists are refused, naming the field.
func TestHostLB(t *testing.T) {
	topo := TopologyConfig{Kind: "fattree2", Hosts: 32, Radix: 8, LinkRate: 100e9, LinkLatency: 500, SwitchLatency: 500}
	mk := func(lb string, hl HostLBConfig) *Scenario {
		sc := scenario(topo, WorkloadConfig{Kind: "permutation", Size: 256 << 10})
		sc.Transport.MaxRetransmits = 255
		sc.Transport.LB = lb
		sc.HostLB = hl
		return sc
	}
	all := make([]int, 32)
	for i := range all {
		all[i] = i
	}
	// The hash of a run without the balancer's name (the summary names transport.lb).
	hash := func(r *Result) string {
		c := *r
		c.LB = ""
		return c.Hash()
	}
	ecmp := hash(run(t, mk("ecmp", HostLBConfig{})))
	repsRun := hash(run(t, mk("reps", HostLBConfig{})))
	if ecmp == repsRun {
		t.Fatal("ecmp and reps runs are identical: the test cannot tell balancers apart")
	}
	if h := hash(run(t, mk("reps", HostLBConfig{LB: "ecmp", Hosts: all}))); h != ecmp {
		t.Error("every host listed as ecmp differs from lb ecmp")
	}
	mixed := run(t, mk("reps", HostLBConfig{LB: "ecmp", Hosts: []int{0, 10, 20}}))
	if h := hash(mixed); h == ecmp || h == repsRun {
		t.Error("three ecmp hosts among reps hosts: the run equals a single-balancer run")
	}
	if mixed.Completed != 32 {
		t.Errorf("mixed run: %d of 32 flows completed", mixed.Completed)
	}
	for _, c := range []struct {
		hl   HostLBConfig
		want string
	}{
		{HostLBConfig{LB: "ecmp", Hosts: []int{32}}, "host 32"},
		{HostLBConfig{LB: "ecmp", Hosts: []int{-1}}, "host -1"},
		{HostLBConfig{LB: "ecmp", Hosts: []int{3, 3}}, "twice"},
		{HostLBConfig{Hosts: []int{3}}, "without host_lb.lb"},
		{HostLBConfig{LB: "ecmp"}, "lists no hosts"},
		{HostLBConfig{LB: "nosuch", Hosts: []int{3}}, "nosuch"},
	} {
		_, err := New(mk("reps", c.hl))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want one containing %q", c.hl, err, c.want)
		}
	}
	if _, err := ParseScenario([]byte("host_lb: {lb: ecmp, hosts: [0, 5]}\n")); err != nil && strings.Contains(err.Error(), "host_lb") {
		t.Errorf("host_lb does not parse: %v", err)
	}
}
