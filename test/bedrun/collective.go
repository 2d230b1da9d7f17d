package bedrun

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/smartt-transport/smartt/test/sim"
	"github.com/smartt-transport/smartt/transport/client"
)

// allReduce lays out ring_allreduce and butterfly_allreduce as the simulator does
// (sim.AllReduceSteps): one flow per host and step, Phase = step.
func allReduce(sc *sim.Scenario, hosts int) ([]sim.FlowResult, error) {
	w := sc.Workload
	n := w.Participants
	if n == 0 {
		n = hosts
	}
	if n < 2 || n > hosts {
		return nil, fmt.Errorf("workload.participants = %d: must be in 2..hosts (%d)", w.Participants, hosts)
	}
	dsts, sizes, err := sim.AllReduceSteps(w.Kind, n, int64(w.Size))
	if err != nil {
		return nil, err
	}
	var fs []sim.FlowResult
	for step := range dsts {
		for i := range n {
			fs = append(fs, sim.FlowResult{Src: i, Dst: dsts[step][i], Size: sizes[step], Phase: step})
		}
	}
	return fs, nil
}

// deps finds each flow's parent: a flow of phase p > 0 starts once its source holds the
// message it received in phase p-1 (both all-reduces' rule); other flows start at their
// time.
func (r *Run) deps(fl []sim.FlowResult) {
	r.parent = make([]int, len(fl))
	r.released = make([]chan struct{}, len(fl))
	r.once = make([]sync.Once, len(fl))
	into := map[[2]int]int{} // (dst, phase) -> flow
	for i, f := range fl {
		into[[2]int{f.Dst, f.Phase}] = i
		r.released[i] = make(chan struct{})
	}
	for i, f := range fl {
		r.parent[i] = -1
		if f.Phase > 0 {
			if p, ok := into[[2]int{f.Src, f.Phase - 1}]; ok {
				r.parent[i] = p
			}
		}
	}
}

// release lets flow i's dependents start (it arrived, or failed).
func (r *Run) release(i int) { r.once[i].Do(func() { close(r.released[i]) }) }

// launch starts every flow in its own goroutine: independent flows at their start offset,
// dependent ones when their parent has arrived (their Start is then the actual start).
func (r *Run) launch(ctx context.Context, start time.Time, fl []sim.FlowResult, sess []*client.Session,
	payload func(int) []byte, mu *sync.Mutex, wg *sync.WaitGroup, errs *[]error) {
	for i := range fl {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := &fl[i]
			if p := r.parent[i]; p >= 0 {
				select {
				case <-r.released[p]:
				case <-ctx.Done():
					return // never started: FCT stays -1
				}
				mu.Lock()
				f.Start = time.Since(start).Nanoseconds()
				mu.Unlock()
			} else if d := time.Until(start.Add(time.Duration(f.Start))); d > 0 {
				time.Sleep(d)
			}
			info, err := sess[f.Src].Send(ctx, r.Addrs[f.Dst], 1, payload(i))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				f.Failed = true
				*errs = append(*errs, fmt.Errorf("flow %d (h%d→h%d): %w", i, f.Src, f.Dst, err))
				r.release(i) // let the rest of the collective go on, as the simulator does
				return
			}
			f.FCT = int64(info.Elapsed)
		}()
	}
}

// chainIdeal is the lower bound of a collective's completion: its phases one after the
// other, each the serialisation of its largest flow plus half a base RTT (the last bit's
// way to the receiver), plus half a base RTT for the last ACK. 0 if fl has one phase.
func chainIdeal(fl []sim.FlowResult, m *Mapped) int64 {
	ser := map[int]int64{}
	for _, f := range fl {
		ser[f.Phase] = max(ser[f.Phase], f.Ideal-int64(m.Transport.BaseRTT))
	}
	if len(ser) < 2 {
		return 0
	}
	half := int64(m.Transport.BaseRTT) / 2
	c := half
	for _, s := range ser {
		c += s + half
	}
	return c
}
