package train

import "testing"

// TestFig8SeriesTotals: the per-bin series of an all-to-all adds up to the run's own
// totals (losses over the whole run; acknowledged bytes of the measured window), and its
// interval helpers sum what add counted.
func TestFig8SeriesTotals(t *testing.T) {
	s := &Series{Bin: 100}
	s.add(50, 10, 20, false)
	s.add(150, 30, 0, false)
	s.add(260, 0, 0, true)
	s.pad(5)
	if len(s.Bytes) != 5 || s.Lost(0, 5) != 1 || s.LastLoss() != 300 || s.RTTus(0, 5) != 20/1e3 {
		t.Fatalf("series %+v: bins, losses, last loss or RTT wrong", s)
	}
	if g := s.Goodput(0, 2, 8); g != 40*8/(8*200/1e9) {
		t.Fatalf("goodput %v", g)
	}
	env := DefaultEnv()
	const warm, end, bin = 200_000, 400_000, 50_000
	runs, err := Fig8(env, PaperTree, []string{"rlcc"}, 512, 1, warm, end, bin, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := runs[0]
	if got := r.Series.Lost(0, len(r.Series.Losses)); got != r.Stats.AllLosses || got == 0 {
		t.Fatalf("series losses %d, run's %d (want equal and > 0: the bring-up trims)", got, r.Stats.AllLosses)
	}
	capacity := float64(env.LinkRate) * float64(PaperTree.Hosts)
	if g := r.Series.Goodput(warm/bin, end/bin, capacity); g != r.Stats.Goodput {
		t.Fatalf("series goodput after warm-up %v, run's %v", g, r.Stats.Goodput)
	}
}
