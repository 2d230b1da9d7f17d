package mpifabric

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/smartt-transport/smartt/test/sim"
)

// The OSU all-to-all runs (Fig. 9 of the RL-CC paper: the MPI_Alltoall latency of each
// controller per message size, relative to the lowest per size) keep the format of
// WriteTSV with the daemons' controller in the Provider column and "alltoall/BYTES" as
// the Stats' Op, since every job of a run is an all-to-all of another size.

// RunOSU runs one MPI_Alltoall job per size over the smartt provider, the daemons'
// controller set to cc, on a fresh healthy testbed at seed.
func RunOSU(sc *sim.Scenario, seed uint64, cc string, sizes []int64, o Options) ([]Row, []Stats, error) {
	if cc == "" {
		return nil, nil, fmt.Errorf("no controller")
	}
	o.CC, o.Ops = cc, nil
	for _, b := range sizes {
		o.Ops = append(o.Ops, Op{Name: "alltoall", Bytes: b})
	}
	rows, stats, err := Run(sc, seed, Smartt, Healthy, o)
	for i := range rows {
		rows[i].Provider = cc
	}
	for i := range stats {
		stats[i].Provider = cc
		if i < len(o.Ops) {
			stats[i].Op = "alltoall/" + strconv.FormatInt(o.Ops[i].Bytes, 10)
		}
	}
	return rows, stats, err
}

// OSUBodyOfTSV is the region of docs/rlcc.md ("rlcc-fig9") of stored OSU runs.
func OSUBodyOfTSV(r io.Reader) (string, error) {
	note, rows, stats, err := ReadTSV(r)
	if err != nil {
		return "", err
	}
	return "Runs: " + note + ".\n\n" + RenderOSU(rows) +
		"\nCounters of the jobs (median over the seeds of each job's own):\n\n" + RenderOSUStats(stats), nil
}

// osuOrder returns the controllers and sizes of rows in their first-seen order and
// ascending order.
func osuOrder(rows []Row) (ccs []string, sizes []int64) {
	for _, r := range rows {
		if !slices.Contains(ccs, r.Provider) {
			ccs = append(ccs, r.Provider)
		}
		if !slices.Contains(sizes, r.Bytes) {
			sizes = append(sizes, r.Bytes)
		}
	}
	slices.Sort(sizes)
	return ccs, sizes
}

// RenderOSU is Fig. 9's table: per size, each controller's median latency over the
// seeds relative to the lowest median of that size (the paper's bar length), with its
// median, min and max in microseconds per all-to-all.
func RenderOSU(rows []Row) string {
	ccs, sizes := osuOrder(rows)
	var b strings.Builder
	b.WriteString("| bytes per rank pair |")
	for _, c := range ccs {
		fmt.Fprintf(&b, " %s: relative (median us; min-max) |", c)
	}
	b.WriteString(" lowest |\n|---|" + strings.Repeat("---|", len(ccs)+1) + "\n")
	for _, sz := range sizes {
		cells := map[string]*cell{}
		best, bestCC := 0.0, "-"
		for _, c := range ccs {
			cl := &cell{notOK: map[string]int{}}
			for _, r := range rows {
				if r.Provider == c && r.Bytes == sz {
					cl.add(r)
				}
			}
			cells[c] = cl
			if _, med, _ := Spread(cl.ms); len(cl.ms) > 0 && (best == 0 || med < best) {
				best, bestCC = med, c
			}
		}
		fmt.Fprintf(&b, "| %s |", size(sz))
		for _, c := range ccs {
			fmt.Fprintf(&b, " %s |", osuCell(cells[c], best))
		}
		fmt.Fprintf(&b, " %s |\n", bestCC)
	}
	fmt.Fprintf(&b, "\n%d seeds; a run that did not complete is left out of the spread and counted beside it.\n", seedCount(rows))
	return b.String()
}

// add counts one job in the cell (microseconds per all-to-all when it completed).
func (c *cell) add(r Row) {
	c.runs++
	if r.Status == StatusOK && r.Iters > 0 {
		c.ms = append(c.ms, r.Seconds*1e6/float64(r.Iters))
	} else {
		c.notOK[r.Status]++
	}
}

// osuCell is a controller's cell of one size: median/best, then median; min-max.
func osuCell(c *cell, best float64) string {
	if c == nil || c.runs == 0 {
		return "not run"
	}
	s := "none completed"
	if len(c.ms) > 0 {
		lo, med, hi := Spread(c.ms)
		s = fmt.Sprintf("%.2f (%.0f; %.0f-%.0f)", med/best, med, lo, hi)
	}
	if n := c.runs - len(c.ms); n > 0 {
		s += fmt.Sprintf(" (%d of %d not completed)", n, c.runs)
	}
	return s
}

func seedCount(rows []Row) int {
	var seeds []uint64
	for _, r := range rows {
		if !slices.Contains(seeds, r.Seed) {
			seeds = append(seeds, r.Seed)
		}
	}
	return len(seeds)
}

// RenderOSUStats is the jobs' counters per size and controller: the median over the
// seeds of switch drops, trims, ECN marks and retransmission timeouts.
func RenderOSUStats(stats []Stats) string {
	var ccs, ops []string
	for _, s := range stats {
		if !slices.Contains(ccs, s.Provider) {
			ccs = append(ccs, s.Provider)
		}
		if !slices.Contains(ops, s.Op) {
			ops = append(ops, s.Op)
		}
	}
	slices.SortFunc(ops, func(a, b string) int { return int(opBytes(a) - opBytes(b)) })
	var b strings.Builder
	b.WriteString("| bytes per rank pair | controller | switch drops | trims | ECN marks | retransmission timeouts |\n|---|---|---|---|---|---|\n")
	for _, op := range ops {
		for _, c := range ccs {
			var d, t, m, rto []float64
			for _, s := range stats {
				if s.Provider == c && s.Op == op {
					d, t = append(d, float64(s.Drops)), append(t, float64(s.Trims))
					m, rto = append(m, float64(s.Marks)), append(rto, float64(s.RetxRTO))
				}
			}
			if len(d) == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", size(opBytes(op)), c, medianOf(d), medianOf(t), medianOf(m), medianOf(rto))
		}
	}
	return b.String()
}

// opBytes reads the size of an "alltoall/BYTES" Op (0 for another).
func opBytes(op string) int64 {
	_, v, _ := strings.Cut(op, "/")
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

func medianOf(xs []float64) string {
	_, med, _ := Spread(xs)
	return strconv.FormatFloat(med, 'f', -1, 64)
}
