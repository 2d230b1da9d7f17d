// Package ballsbins is the REPS paper's analysis model (Bonato et al., arXiv:2407.21625,
// Sec. 5.1 and Apps. B-C): a switch's output ports are bins, packets are balls. In the
// infinite batched process each non-empty bin sends one ball per time step and n new balls
// arrive (full throughput); OPS throws them uniformly at random, the recycled process lets
// each of c·n colors (entropy values) remember the bin its last ball left from, unless that
// bin held more than a threshold of balls (an ECN mark). Imbalance covers App. B: the
// EVS-size analysis of a one-shot throw of EVs onto ports.
//
// Everything is deterministic for a seed (math/rand/v2's PCG).
package ballsbins

import (
	"fmt"
	"math/rand/v2"
)

// Config sets up a Process.
type Config struct {
	Bins int // n: output ports
	// Colors is the number of colors (EVs) cycled through in batches of Bins; 0 runs OPS
	// (every ball thrown uniformly at random). It must be a multiple of Bins.
	Colors int
	// Threshold is tau: a color remembers the bin its ball leaves from only when the bin
	// held at most Threshold balls (the ball included); above it the color forgets.
	Threshold int
	// Recycle is the recycling ratio r (App. D.1, ACK coalescing r:1): the colors' memories
	// are updated once every r steps, for every ball that left since (an ACK listing the
	// EVs of all the packets it covers). 0 or 1: every step.
	Recycle int
	// TriggerOnly: of every r balls thrown only the last is fed back, at once; the colors
	// of the others forget their bin (an ACK returning only its trigger's EV: the others
	// are drawn afresh, as REPS does with an empty buffer).
	TriggerOnly bool
	Seed        uint64 // the random throws' seed
}

// Process is the batched balls-into-bins process at full injection rate.
type Process struct {
	cfg Config
	rng *rand.Rand
	// q holds per bin its balls in FIFO order from head (OPS: unused), each as its throw
	// number modulo Colors x Recycle: the ball's color is that modulo Colors.
	q       [][]int32
	head    []int
	load    []int
	mem     []int32 // per color: the remembered bin, -1 none
	thrown  int     // balls thrown, modulo Colors x Recycle
	pending []feedback
	changed bool // a color's memory changed or a ball was thrown at random this step
	step    int
}

// feedback is what a removed ball tells its color: the bin, and whether it was marked.
type feedback struct {
	col    int32
	bin    int32
	marked bool
}

// New returns an empty process (no ball in any bin, no color remembering a bin).
func New(c Config) (*Process, error) {
	if c.Bins < 1 {
		return nil, fmt.Errorf("ballsbins: %d bins", c.Bins)
	}
	if c.Colors < 0 || c.Colors%c.Bins != 0 {
		return nil, fmt.Errorf("ballsbins: %d colors is not a multiple of %d bins", c.Colors, c.Bins)
	}
	if c.Colors > 0 && c.Threshold < 1 {
		return nil, fmt.Errorf("ballsbins: threshold %d", c.Threshold)
	}
	if c.Recycle < 1 {
		c.Recycle = 1
	}
	p := &Process{cfg: c, rng: rand.New(rand.NewPCG(c.Seed, 0x5eed_ba11)), load: make([]int, c.Bins)}
	if c.Colors > 0 {
		p.q = make([][]int32, c.Bins)
		p.head = make([]int, c.Bins)
		p.mem = make([]int32, c.Colors)
		for i := range p.mem {
			p.mem[i] = -1
		}
	}
	return p, nil
}

// Step runs one time step: every non-empty bin removes its oldest ball, then a batch of
// Bins balls is thrown. It returns the maximum load after the throw.
func (p *Process) Step() int {
	p.step++
	p.changed = false
	for b := range p.load {
		if p.load[b] == 0 {
			continue
		}
		if p.mem != nil {
			p.remove(b)
		}
		p.load[b]--
	}
	if p.mem != nil && (p.cfg.TriggerOnly || p.step%p.cfg.Recycle == 0) {
		p.feed()
	}
	n := p.cfg.Bins
	for range n {
		b := -1
		if p.mem != nil {
			col := p.thrown % p.cfg.Colors
			b = int(p.mem[col])
			if b < 0 {
				b = p.rng.IntN(n)
				p.changed = true
			}
			p.q[b] = append(p.q[b], int32(p.thrown))
			p.thrown = (p.thrown + 1) % (p.cfg.Colors * p.cfg.Recycle)
		} else {
			b = p.rng.IntN(n)
		}
		p.load[b]++
	}
	return p.MaxLoad()
}

// remove takes bin b's oldest ball and queues what it tells its color.
func (p *Process) remove(b int) {
	ball := int(p.q[b][p.head[b]])
	lost := p.cfg.TriggerOnly && ball%p.cfg.Recycle != p.cfg.Recycle-1
	p.pending = append(p.pending, feedback{int32(ball % p.cfg.Colors), int32(b), lost || p.load[b] > p.cfg.Threshold})
	p.head[b]++
	if h := p.head[b]; h >= 64 && 2*h >= len(p.q[b]) { // reuse the storage, in O(1) amortised
		p.q[b] = p.q[b][:copy(p.q[b], p.q[b][h:])]
		p.head[b] = 0
	}
}

// feed applies the pending feedback: a marked ball's color forgets its bin, an unmarked
// one's remembers the bin, unless it already remembers one.
func (p *Process) feed() {
	for _, f := range p.pending {
		old := p.mem[f.col]
		switch {
		case f.marked:
			p.mem[f.col] = -1
		case old < 0:
			p.mem[f.col] = f.bin
		}
		if p.mem[f.col] != old {
			p.changed = true
		}
	}
	p.pending = p.pending[:0]
}

// MaxLoad is the largest number of balls in a bin.
func (p *Process) MaxLoad() int {
	m := 0
	for _, l := range p.load {
		m = max(m, l)
	}
	return m
}

// Balls is the number of balls in all bins.
func (p *Process) Balls() int {
	s := 0
	for _, l := range p.load {
		s += l
	}
	return s
}

// Settled reports whether every color remembers a bin and, in the last step, no memory
// changed and no ball was thrown at random: from then on every step repeats the one c
// steps before (the paper's convergence, once it holds for a whole cycle of colors).
func (p *Process) Settled() bool {
	if p.mem == nil || p.changed {
		return false
	}
	for _, b := range p.mem {
		if b < 0 {
			return false
		}
	}
	return true
}

// Run is the outcome of a process run for a number of steps.
type Run struct {
	MaxLoad []int // the maximum load after each step
	Peak    int   // the largest of MaxLoad
	// Converged is the step from which the process stayed settled to the end, when that
	// lasted at least four cycles of colors (-1: never).
	Converged int
	Over      int // steps whose maximum load exceeded the threshold
	// Balls is the number of balls in the bins at the end: it never falls, and rises by
	// one for every bin that was empty in a step.
	Balls int
}

// Simulate runs a fresh process of c for steps steps.
func Simulate(c Config, steps int) (Run, error) {
	p, err := New(c)
	if err != nil {
		return Run{}, err
	}
	r := Run{MaxLoad: make([]int, steps), Converged: -1}
	for t := range steps {
		m := p.Step()
		r.MaxLoad[t] = m
		r.Peak = max(r.Peak, m)
		if c.Threshold > 0 && m > c.Threshold {
			r.Over++
		}
		switch {
		case !p.Settled():
			r.Converged = -1
		case r.Converged < 0:
			r.Converged = t + 1
		}
	}
	r.Balls = p.Balls()
	if r.Converged >= 0 && steps-r.Converged+1 < 4*c.Colors/c.Bins {
		r.Converged = -1
	}
	return r, nil
}
