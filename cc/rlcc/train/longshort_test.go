package train

import "testing"

// TestLongShortReaction: the long-short test times the long flow's reaction (its goodput
// halves once the burst floods the queue) and its recovery after the burst drained, in
// 20 us bins: both within the run, reaction first; a controller that never recovers
// (DCQCN at these constants) reports -1.
func TestLongShortReaction(t *testing.T) {
	env := DefaultEnv()
	ls := LongShort{Long: 1, Short: 20, ShortSize: 64 << 10, Burst: 1_000_000, End: 3_000_000}
	st, err := env.RunLongShort(&CCPolicy{CC: "smartt"}, ls, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", st)
	if st.ShortDone != ls.Short || st.ReactUs <= 0 || st.ReactUs > 200 || st.RecoverUs <= 0 || st.RecoverUs > 1000 {
		t.Fatalf("smartt: %d short flows done, reaction %v us, recovery %v us", st.ShortDone, st.ReactUs, st.RecoverUs)
	}
	st, err = env.RunLongShort(&CCPolicy{CC: "dcqcn"}, ls, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.RecoverUs != -1 {
		t.Fatalf("dcqcn recovered after %v us; its long flow stays starved in the full run", st.RecoverUs)
	}
}

// The seed moves the burst's start times, so seeds are different runs for a controller
// that draws no random numbers (RL-CC, Swift), not one run repeated.
func TestLongShortSeedsDiffer(t *testing.T) {
	env := DefaultEnv()
	ls := LongShort{Long: 1, Short: 8, ShortSize: 64 << 10, Burst: 1_000_000, End: 1_500_000}
	for _, name := range []string{"rlcc", "swift"} {
		a, err := env.RunLongShort(&CCPolicy{CC: name}, ls, 1)
		if err != nil {
			t.Fatal(err)
		}
		b, err := env.RunLongShort(&CCPolicy{CC: name}, ls, 2)
		if err != nil {
			t.Fatal(err)
		}
		if a == b {
			t.Errorf("%s: seeds 1 and 2 gave the same run: %+v", name, a)
		}
	}
}
