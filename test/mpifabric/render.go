package mpifabric

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// tsvHeader starts the stored results; the rest of its line is free text (the run's set-up).
const tsvHeader = "# seed\tprovider\tcondition\top\tbytes\titers\tseconds\tstatus"

// statsHeader starts the runs' counters, after the rows.
const statsHeader = "# seed\tprovider\tcondition\top\tdrops\ttrims\tmarks\tdown_drops\tretx_sack\tretx_nack\tretx_rto\tdup_data\tup_share"

// WriteTSV writes rows under the header, note (one line) after it, then the runs' stats.
func WriteTSV(w io.Writer, note string, rows []Row, stats []Stats) error {
	if strings.ContainsAny(note, "\n\t") {
		return fmt.Errorf("note %q: one line, no tabs", note)
	}
	fmt.Fprintf(w, "%s\t%s\n", tsvHeader, note)
	for _, r := range rows {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%d\t%.6f\t%s\n", r.Seed, r.Provider, r.Condition, r.Op, r.Bytes, r.Iters, r.Seconds, r.Status)
	}
	fmt.Fprintln(w, statsHeader)
	for _, s := range stats {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.4f\n", s.Seed, s.Provider, s.Condition, s.Op,
			s.Drops, s.Trims, s.Marks, s.DownDrops, s.RetxSack, s.RetxNack, s.RetxRTO, s.DupData, s.UpShare)
	}
	return nil
}

// readStats reads one stats line.
func readStats(line string) (Stats, error) {
	f := strings.Split(line, "\t")
	if len(f) != 13 {
		return Stats{}, fmt.Errorf("%d fields, want 13", len(f))
	}
	s := Stats{Provider: f[1], Condition: f[2], Op: f[3]}
	var errs [10]error
	s.Seed, errs[0] = strconv.ParseUint(f[0], 10, 64)
	for i, p := range []*uint64{&s.Drops, &s.Trims, &s.Marks, &s.DownDrops, &s.RetxSack, &s.RetxNack, &s.RetxRTO, &s.DupData} {
		*p, errs[i+1] = strconv.ParseUint(f[i+4], 10, 64)
	}
	s.UpShare, errs[9] = strconv.ParseFloat(f[12], 64)
	if err := firstErr(errs[:]...); err != nil || s.UpShare < 0 || s.UpShare > 1 {
		return Stats{}, fmt.Errorf("bad numbers (%v)", err)
	}
	return s, nil
}

// ReadTSV reads what WriteTSV wrote: the note, the rows and the stats.
func ReadTSV(r io.Reader) (string, []Row, []Stats, error) {
	sc := bufio.NewScanner(r)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), tsvHeader) {
		return "", nil, nil, fmt.Errorf("no header %q", tsvHeader)
	}
	note := strings.TrimPrefix(strings.TrimPrefix(sc.Text(), tsvHeader), "\t")
	var rows []Row
	var stats []Stats
	inStats := false
	for n := 2; sc.Scan(); n++ {
		if sc.Text() == statsHeader {
			inStats = true
			continue
		}
		if inStats {
			s, err := readStats(sc.Text())
			if err != nil {
				return "", nil, nil, fmt.Errorf("line %d: %w", n, err)
			}
			stats = append(stats, s)
			continue
		}
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 8 {
			return "", nil, nil, fmt.Errorf("line %d: %d fields, want 8", n, len(f))
		}
		r := Row{Provider: f[1], Condition: f[2], Op: f[3], Status: f[7]}
		var err1, err2, err3, err4 error
		r.Seed, err1 = strconv.ParseUint(f[0], 10, 64)
		r.Bytes, err2 = strconv.ParseInt(f[4], 10, 64)
		r.Iters, err3 = strconv.Atoi(f[5])
		r.Seconds, err4 = strconv.ParseFloat(f[6], 64)
		if err := firstErr(err1, err2, err3, err4); err != nil || r.Iters < 1 || r.Seconds < 0 {
			return "", nil, nil, fmt.Errorf("line %d: bad numbers (%v)", n, err)
		}
		rows = append(rows, r)
	}
	return note, rows, stats, sc.Err()
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// Body is the region of docs/results/mpi.md: the runs' note, the timing table and the
// counters' table.
func Body(note string, rows []Row, stats []Stats, failLink string) string {
	return "Runs: " + note + ".\n\n" + Render(rows, failLink) +
		"\nCounters of the jobs (each MPI job's own, read before and after it; median over the seeds):\n\n" + RenderStats(stats, failLink)
}

// BodyOfTSV is Body of stored results (the failed link read from the note's "fail LINK").
func BodyOfTSV(r io.Reader) (string, error) {
	note, rows, stats, err := ReadTSV(r)
	if err != nil {
		return "", err
	}
	link := ""
	if _, rest, ok := strings.Cut(note, "; fail "); ok {
		link, _, _ = strings.Cut(rest, " ")
	}
	return Body(note, rows, stats, link), nil
}

// Spread is min, median and max of xs (the median of an even count is the mean of the
// middle two); zeros for none.
func Spread(xs []float64) (lo, med, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return s[0], med, s[n-1]
}

// cell is one provider's runs of one operation and condition.
type cell struct {
	ms    []float64 // per completed run: milliseconds per operation
	runs  int
	notOK map[string]int // status -> runs
}

func (c *cell) String() string {
	if c == nil || c.runs == 0 {
		return "not run"
	}
	s := "none completed"
	if len(c.ms) > 0 {
		lo, med, hi := Spread(c.ms)
		s = fmt.Sprintf("%.0f / %.0f / %.0f", lo, med, hi)
	}
	var bad []string
	for _, st := range []string{StatusTimeout, StatusWrong, StatusError} {
		if n := c.notOK[st]; n > 0 {
			bad = append(bad, fmt.Sprintf("%s in %d of %d", st, n, c.runs))
		}
	}
	if len(bad) > 0 {
		s += " (" + strings.Join(bad, ", ") + ")"
	}
	return s
}

// Render is the table of the rows: per operation, size and condition, each provider's
// time per operation (min / median / max over the seeds of completed runs) and the ratio
// of the medians.
func Render(rows []Row, failLink string) string {
	type key struct {
		op        string
		bytes     int64
		condition string
	}
	cells := map[key]map[string]*cell{}
	var keys []key
	seeds := map[uint64]bool{}
	for _, r := range rows {
		k := key{r.Op, r.Bytes, r.Condition}
		if cells[k] == nil {
			cells[k] = map[string]*cell{}
			keys = append(keys, k)
		}
		c := cells[k][r.Provider]
		if c == nil {
			c = &cell{notOK: map[string]int{}}
			cells[k][r.Provider] = c
		}
		c.runs++
		seeds[r.Seed] = true
		if r.Status == StatusOK {
			c.ms = append(c.ms, r.Seconds/float64(r.Iters)*1e3)
		} else {
			c.notOK[r.Status]++
		}
	}
	slices.SortStableFunc(keys, func(a, b key) int {
		if a.op != b.op {
			return strings.Compare(a.op, b.op)
		}
		if a.bytes != b.bytes {
			return int(a.bytes - b.bytes)
		}
		return strings.Compare(condOrder(a.condition), condOrder(b.condition))
	})
	var b strings.Builder
	fmt.Fprintf(&b, "| operation | fabric | tcp: ms per operation, min / median / max | smartt: ms per operation, min / median / max | smartt / tcp (medians) |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, k := range keys {
		t, s := cells[k][TCP], cells[k][Smartt]
		ratio := "-"
		if t != nil && s != nil && len(t.ms) > 0 && len(s.ms) > 0 {
			_, tm, _ := Spread(t.ms)
			_, sm, _ := Spread(s.ms)
			ratio = fmt.Sprintf("%.2fx", sm/tm)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", opName(k.op, k.bytes), condName(k.condition, failLink), t, s, ratio)
	}
	fmt.Fprintf(&b, "\n%d seeds; a run that did not complete is left out of the spread and counted beside it.\n", len(seeds))
	return b.String()
}

// condOrder sorts conditions as Conditions lists them, others after.
func condOrder(c string) string {
	if i := slices.Index(Conditions, c); i >= 0 {
		return strconv.Itoa(i)
	}
	return "9" + c
}

func condName(c, link string) string {
	if link == "" {
		link = "a link"
	}
	switch c {
	case Failed:
		return link + " fails"
	case FailedNow:
		return link + " fails, rerouted at once"
	case OneSpine:
		return "one spine, healthy"
	}
	return c
}

func opName(op string, bytes int64) string {
	name := map[string]string{"alltoall": "MPI_Alltoall", "allreduce": "MPI_Allreduce"}[op]
	if name == "" {
		name = op
	}
	per := "per rank pair"
	if op == "allreduce" {
		per = "per rank"
	}
	return fmt.Sprintf("%s, %s %s", name, size(bytes), per)
}

func size(b int64) string {
	switch {
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}

// RenderStats is the table of the jobs' counters: per operation, condition and
// provider, the median over the seeds of each.
func RenderStats(stats []Stats, failLink string) string {
	type key struct{ op, cond, prov string }
	groups := map[key][]Stats{}
	var keys []key
	for _, s := range stats {
		k := key{s.Op, s.Condition, s.Provider}
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], s)
	}
	slices.SortStableFunc(keys, func(a, b key) int {
		if a.op != b.op {
			return strings.Compare(a.op, b.op)
		}
		if a.cond != b.cond {
			return strings.Compare(condOrder(a.cond), condOrder(b.cond))
		}
		return strings.Compare(a.prov, b.prov)
	})
	var b strings.Builder
	b.WriteString("| operation | fabric | provider | switch drops | trims | ECN marks | sent into the failed link |" +
		" smartt retx: SACK gap / NACK / timeout | duplicates received | busiest spine's share of uplink bytes |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range keys {
		med := func(f func(Stats) uint64) float64 {
			xs := make([]float64, 0, len(groups[k]))
			for _, s := range groups[k] {
				xs = append(xs, float64(f(s)))
			}
			_, m, _ := Spread(xs)
			return m
		}
		shares := make([]float64, 0, len(groups[k]))
		for _, s := range groups[k] {
			shares = append(shares, s.UpShare)
		}
		_, share, _ := Spread(shares)
		fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f / %.0f / %.0f | %.0f | %.2f |\n",
			opShort(k.op), condName(k.cond, failLink), k.prov,
			med(func(s Stats) uint64 { return s.Drops }), med(func(s Stats) uint64 { return s.Trims }),
			med(func(s Stats) uint64 { return s.Marks }), med(func(s Stats) uint64 { return s.DownDrops }),
			med(func(s Stats) uint64 { return s.RetxSack }), med(func(s Stats) uint64 { return s.RetxNack }),
			med(func(s Stats) uint64 { return s.RetxRTO }), med(func(s Stats) uint64 { return s.DupData }), share)
	}
	return b.String()
}

func opShort(op string) string {
	if n := map[string]string{"alltoall": "MPI_Alltoall", "allreduce": "MPI_Allreduce"}[op]; n != "" {
		return n
	}
	return op
}
