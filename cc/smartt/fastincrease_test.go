package smartt_test

import (
	"fmt"
	"testing"

	"github.com/smartt-transport/smartt/cc/smartt"
)

// reclaim runs eight flows on the bottleneck; seven send 4 MiB and finish, the eighth
// sends 32 MiB. It returns the time the last short flow finished, how long the long flow
// then took to reach a window of one BDP, and its throughput (Gbit/s) over the five base
// RTTs after that finish; once per test binary.
func reclaim(t *testing.T, noFI bool) (done, took int64, tput float64, st smartt.Stats) {
	x := once(fmt.Sprint("reclaim", noFI), func() reclaimRun {
		var x reclaimRun
		x.done, x.took, x.tput, x.st = runReclaim(t, noFI)
		return x
	})
	return x.done, x.took, x.tput, x.st
}

type reclaimRun struct {
	done, took int64
	tput       float64
	st         smartt.Stats
}

func runReclaim(t *testing.T, noFI bool) (done, took int64, tput float64, st smartt.Stats) {
	r := newRig(t, rigOpts{senders: 8, trim: true, record: true, seed: 5,
		mod: func(c *smartt.Config) { c.DisableFastIncrease = noFI }})
	r.Send(0, 32<<20)
	for i := 1; i < 8; i++ {
		r.Send(i, 4<<20)
	}
	short := func() bool {
		for i := 1; i < 8; i++ {
			if len(r.SentAt[i]) == 0 {
				return false
			}
		}
		return true
	}
	if !r.Run(100_000_000, short) {
		t.Fatal("short flows did not finish")
	}
	done = r.Net.Now()
	brtt := baseRTT()
	r.Run(40*brtt, nil)
	f := r.flows[0]
	took = -1
	for _, s := range f.timeline {
		if s.t >= done && s.cwnd >= bdpBytes() {
			took = s.t - done
			break
		}
	}
	// Throughput seen by ACKs one base RTT later than what was sent in the interval.
	tput = float64(f.ackedAt(done+6*brtt)-f.ackedAt(done+brtt)) * 8 / float64(5*brtt)
	return done, took, tput, f.stats()
}

// TestFastIncreaseReclaims: when the short flows finish, the long one gets the link
// back within a few base RTTs thanks to FastIncrease; without it, it takes many more.
func TestFastIncreaseReclaims(t *testing.T) {
	brtt := float64(baseRTT())
	res := map[bool]float64{}
	for _, noFI := range []bool{false, true} {
		t.Run(fmt.Sprintf("fastincrease=%v", !noFI), func(t *testing.T) {
			done, took, tput, st := reclaim(t, noFI)
			res[noFI] = float64(took)
			t.Logf("short flows done at %.1f us; long flow reached 1 BDP %.1f base RTTs later; %.1f Gbit/s over the next 5 base RTTs; FastIncrease activations %d (%d ACKs)",
				float64(done)/1e3, float64(took)/brtt, tput, st.FastIncrease, st.FastIncreaseAcks)
			if noFI {
				return
			}
			if took < 0 || float64(took) > 4*brtt {
				t.Errorf("window reached 1 BDP after %.1f base RTTs, want <= 4", float64(took)/brtt)
			}
			if tput < 80 {
				t.Errorf("long flow carried %.1f Gbit/s after the others left, want >= 80", tput)
			}
			if st.FastIncrease == 0 {
				t.Error("FastIncrease never activated")
			}
		})
	}
	if res[true] >= 0 && res[true] < 2*res[false] {
		t.Errorf("without FastIncrease the window recovered in %.1f base RTTs, with it %.1f: FastIncrease does not matter?",
			res[true]/brtt, res[false]/brtt)
	}
}
