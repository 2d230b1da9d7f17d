package sweep

import (
	"fmt"
	"sync"
	"time"

	"github.com/smartt-transport/smartt/test/sim"
)

// Runner runs one scenario: the simulator (SimRunner) or the testbed.
type Runner func(sc *sim.Scenario) (*sim.Result, error)

// SimRunner runs a scenario in the simulator.
func SimRunner(sc *sim.Scenario) (*sim.Result, error) {
	s, err := sim.New(sc)
	if err != nil {
		return nil, err
	}
	return s.Run(), nil
}

// Done reports a finished job: its run, or the error that stopped it, and its wall time.
type Done func(k int, r *Run, res *sim.Result, err error, wall time.Duration)

// RunJobs runs the listed jobs on parallel workers (each run is deterministic for its
// seed, so the order they finish in changes nothing) and reports each to done, which is
// called from one goroutine at a time. After the first error no further job starts; the
// first error is returned.
func (s *Spec) RunJobs(jobs []int, parallel int, run Runner, done Done) error {
	parallel = max(1, min(parallel, len(jobs)))
	next := make(chan int)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				t0 := time.Now()
				r, res, err := s.runJob(k, run)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				done(k, r, res, err, time.Since(t0))
				mu.Unlock()
			}
		}()
	}
	for _, k := range jobs {
		mu.Lock()
		stop := first != nil
		mu.Unlock()
		if stop {
			break
		}
		next <- k
	}
	close(next)
	wg.Wait()
	return first
}

func (s *Spec) runJob(k int, run Runner) (*Run, *sim.Result, error) {
	p, sc, err := s.Job(k)
	if err != nil {
		return nil, nil, err
	}
	res, err := run(sc)
	if err != nil {
		return nil, nil, fmt.Errorf("job %d (%s, seed %d): %w", k, s.Label(p), sc.Seed, err)
	}
	r, err := s.NewRun(k, res)
	return r, res, err
}
