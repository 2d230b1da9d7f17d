package train

import (
	"strings"
	"testing"
)

// TestRunTree: on a small leaf-spine, a many-to-one fills the receiver's link and an
// all-to-all runs hosts*k flows; sizes the simulator cannot run are refused.
func TestRunTree(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates")
	}
	env := DefaultEnv()
	tr := Tree{Hosts: 8, Leaves: 2, Spines: 2}
	st, err := env.RunTree(&CCPolicy{CC: "rlcc"}, tr, "many-to-one", 4, 1, 1_000_000, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	if st.Goodput < 0.7 || st.Goodput > 1 || st.RTTus <= 0 {
		t.Errorf("many-to-one: %+v", st)
	}
	st, err = env.RunTree(&CCPolicy{CC: "rlcc"}, tr, "all-to-all", 16, 1, 1_000_000, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	if st.Flows != 16 || st.Goodput < 0.3 || st.Goodput > 1 || st.AllLosses < st.Losses {
		t.Errorf("all-to-all: %+v", st)
	}
	for _, bad := range []struct {
		kind string
		n    int
	}{{"many-to-one", 8}, {"many-to-one", 0}, {"all-to-all", 12}, {"all-to-all", 64}, {"incast", 4}} {
		if _, err := env.RunTree(&CCPolicy{CC: "rlcc"}, tr, bad.kind, bad.n, 1, 1_000_000, 1_000_000); err == nil || !strings.Contains(err.Error(), bad.kind) {
			t.Errorf("%s %d: %v", bad.kind, bad.n, err)
		}
	}
}
