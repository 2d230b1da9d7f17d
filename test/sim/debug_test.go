package sim

import (
	"testing"
)

func TestDebugStorm(t *testing.T) {
	sc, err := LoadScenario("scenarios/smartt_1024_permutation.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc.Deadline = 23_000
	s, _ := New(sc)
	s.Run()
	var cnt [16]int
	hostT := map[int32]int{}
	for i := 0; i < 200000 && s.q.len() > 0; i++ {
		e := s.q.h[0]
		cnt[e.kind()]++
		if e.kind() == evTimer {
			hostT[e.id()]++
		}
		s.step()
	}
	t.Log(cnt, s.now, len(hostT))
	for h, n := range hostT {
		if n > 1000 {
			hh := &s.hosts[h]
			d, ok := hh.ep.NextTimeout()
			t.Log(h, n, d, ok, s.now, hh.nicBusy, hh.nicFree, hh.ep.Conns(nil))
			break
		}
	}
}
