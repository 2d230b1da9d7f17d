package mpisuites

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Render writes the page's tables from the stored runs under dir and the causes.
func Render(dir string, causes Causes) (string, error) {
	runs, err := Load(dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	var exc []Exception
	b.WriteString("| suite | smartt | tests | pass over tcp | pass over smartt | tcp passes not passing over smartt | wall tcp (s) | wall smartt (s) | ratio (goal <= 1.5x) | tests passing over both: tcp / smartt (s) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range Suites {
		for i, st := range Setups {
			t, m := runs["tcp"][s.Name], runs[st.Dir][s.Name]
			if m == nil && i > 0 {
				continue // a deployment not measured at all is left out
			}
			exc = append(exc, writeRow(&b, s.Name, s.Title, st.Title, t, m, causes)...)
		}
	}
	b.WriteString("\n")
	writeExceptions(&b, exc)
	writeReferenceFailures(&b, runs)
	if err := writeNetPIPE(&b, filepath.Join(dir, "netpipe.tsv")); err != nil {
		return "", err
	}
	writeDates(&b, runs)
	return b.String(), nil
}

// writeRow writes one suite's row for one smartt deployment and returns its exceptions.
func writeRow(b *strings.Builder, suite, title, setup string, t, m *Run, causes Causes) []Exception {
	if t == nil && m == nil {
		fmt.Fprintf(b, "| %s | %s | not run | | | | | | | |\n", title, setup)
		return nil
	}
	cell := func(r *Run, f func(*Run) string) string {
		if r == nil {
			return "not run"
		}
		return f(r)
	}
	npass := func(r *Run) string { return strconv.Itoa(len(r.Passed())) }
	wall := func(r *Run) string { return fmt.Sprintf("%.0f", r.Wall) }
	tests := t
	if tests == nil {
		tests = m
	}
	var exc []Exception
	missing, ratio, both := "-", "-", "-"
	if t != nil && m != nil {
		name := suite
		if setup != Setups[0].Title {
			name += " (" + setup + ")"
		}
		exc = Exceptions(name, t, m, causes)
		missing = strconv.Itoa(len(exc))
		ratio = verdict(m.Wall/t.Wall, m.Wall <= WallGoal*t.Wall)
		if limits(t, m) != "" && t.Limit != m.Limit {
			st, sm, n := CommonSeconds(t, m)
			ratio = verdict(sm/st, sm <= WallGoal*st) + fmt.Sprintf(", summed times of the %d tests both ran", n)
		}
		if st, sm, n := BothPassedSeconds(t, m); n > 0 && st > 0 {
			both = fmt.Sprintf("%.0f / %.0f (%.2fx, %d tests)", st, sm, sm/st, n)
		}
	}
	if lim := limits(t, m); lim != "" {
		title += " (" + lim + ")"
	}
	fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", title, setup, len(tests.Tests),
		cell(t, npass), cell(m, npass), missing, cell(t, wall), cell(m, wall), ratio, both)
	return exc
}

// limits says when a run covered only part of its testlist (MPICH_LIMIT).
func limits(runs ...*Run) string {
	var out []string
	for _, r := range runs {
		if r != nil && r.Limit != "" && r.Limit != "all" && !slices.Contains(out, r.Limit) {
			out = append(out, r.Limit)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "first " + strings.Join(out, "/") + " testlist entries only"
}

func verdict(ratio float64, met bool) string {
	if met {
		return fmt.Sprintf("%.2fx (met)", ratio)
	}
	return fmt.Sprintf("%.2fx (**not met**)", ratio)
}

func writeExceptions(b *strings.Builder, exc []Exception) {
	if len(exc) == 0 {
		b.WriteString("Every test that passes over tcp passes over smartt (in the suites run over both).\n\n")
		return
	}
	b.WriteString("Passing over tcp, not over smartt:\n\n| suite | test | cause |\n|---|---|---|\n")
	for _, e := range exc {
		fmt.Fprintf(b, "| %s | %s | %s |\n", e.Suite, e.Test, e.Cause)
	}
	b.WriteString("\n")
}

// writeReferenceFailures lists what fails over tcp, so a reader sees the reference's own
// failures (MPI-4 calls Open MPI 4.1 lacks, hydra-only options, ...), and smartt passes
// beyond tcp's.
func writeReferenceFailures(b *strings.Builder, runs map[string]map[string]*Run) {
	listed := false
	for _, s := range Suites {
		t, m := runs["tcp"][s.Name], runs["smartt"][s.Name]
		if t == nil {
			continue
		}
		var fail, extra []string
		for n, o := range t.Tests {
			if !o.Pass {
				fail = append(fail, n)
				if m != nil && m.Tests[n].Pass {
					extra = append(extra, n)
				}
			}
		}
		if len(fail) == 0 {
			continue
		}
		slices.Sort(fail)
		slices.Sort(extra)
		listed = true
		fmt.Fprintf(b, "- %s, failing over tcp (%d): %s", s.Name, len(fail), strings.Join(fail, ", "))
		if len(extra) > 0 {
			fmt.Fprintf(b, "; of these, passing over smartt: %s", strings.Join(extra, ", "))
		}
		b.WriteString(".\n")
	}
	if listed {
		b.WriteString("\n")
	}
}

// np is one NetPIPE measurement.
type np struct {
	round      int
	provider   string
	bytes      int
	mbps, usec float64
}

func readNetPIPE(path string) ([]np, string, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	var out []np
	date := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "#"); ok {
			if i := strings.Index(d, "date "); i >= 0 {
				date = strings.TrimSpace(d[i+5:])
			}
			continue
		}
		var p np
		var err error
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			return nil, "", fmt.Errorf("%s:%d: want round, provider, bytes, Mbps, usec", path, n)
		}
		p.provider = f[1]
		if p.round, err = strconv.Atoi(f[0]); err == nil {
			if p.bytes, err = strconv.Atoi(f[2]); err == nil {
				if p.mbps, err = strconv.ParseFloat(f[3], 64); err == nil {
					p.usec, err = strconv.ParseFloat(f[4], 64)
				}
			}
		}
		if err != nil {
			return nil, "", fmt.Errorf("%s:%d: %v", path, n, err)
		}
		out = append(out, p)
	}
	return out, date, sc.Err()
}

// spread returns min, median and max of xs (sorted in place); zeros (failed runs) count.
func spread(xs []float64) (lo, med, hi float64) {
	slices.Sort(xs)
	return xs[0], xs[len(xs)/2], xs[len(xs)-1]
}

func writeNetPIPE(b *strings.Builder, path string) error {
	pts, date, err := readNetPIPE(path)
	if err != nil {
		return err
	}
	if len(pts) == 0 {
		b.WriteString("NetPIPE: not run (`scripts/mpi-suites netpipe`).\n\n")
		return nil
	}
	rounds := 0
	for _, p := range pts {
		rounds = max(rounds, p.round)
	}
	var setups []string // the smartt deployments measured, in Setups' order
	head := "| metric | tcp |"
	for _, st := range Setups {
		for _, p := range pts {
			if p.provider == st.Dir {
				setups = append(setups, st.Dir)
				head += fmt.Sprintf(" smartt, %s | ratio of medians |", st.Title)
				break
			}
		}
	}
	fmt.Fprintf(b, "NetPIPE (`NPopenmpi`, 2 ranks, tcp and smartt alternating, %d rounds, %s; min / median / max; 0 is a run that failed):\n\n", rounds, date)
	b.WriteString(head + " goal |\n|---|---|" + strings.Repeat("---|---|", len(setups)) + "---|\n")
	rows := []struct {
		name  string
		bytes int
		lat   bool
	}{{"latency at 8 B (us)", 8, true}, {"bandwidth at 1 MiB (Mbit/s)", 1 << 20, false}, {"bandwidth at 16 MiB (Mbit/s)", 16 << 20, false}}
	for _, r := range rows {
		vals := map[string][]float64{}
		for _, p := range pts {
			if p.bytes == r.bytes {
				v := p.mbps
				if r.lat {
					v = p.usec
				}
				vals[p.provider] = append(vals[p.provider], v)
			}
		}
		cell := func(prov string) (string, float64) {
			if len(vals[prov]) == 0 {
				return "not run", 0
			}
			lo, med, hi := spread(vals[prov])
			return fmt.Sprintf("%.1f / %.1f / %.1f", lo, med, hi), med
		}
		tc, tm := cell("tcp")
		line := fmt.Sprintf("| %s | %s |", r.name, tc)
		for _, st := range setups {
			sc, sm := cell(st)
			ratio := "-"
			if tm > 0 && sm > 0 {
				q := sm / tm
				ratio = verdict(q, (r.lat && q <= LatencyGoal) || (!r.lat && q >= 1))
			}
			line += fmt.Sprintf(" %s | %s |", sc, ratio)
		}
		goal := "<= 1.5x tcp"
		if !r.lat {
			goal = ">= tcp"
		}
		fmt.Fprintf(b, "%s %s |\n", line, goal)
	}
	b.WriteString("\n")
	return nil
}

func writeDates(b *strings.Builder, runs map[string]map[string]*Run) {
	var ds []string
	provs := []string{"tcp"}
	for _, st := range Setups {
		provs = append(provs, st.Dir)
	}
	for _, p := range provs {
		for _, s := range Suites {
			if r := runs[p][s.Name]; r != nil {
				d := fmt.Sprintf("%s %s %s", p, s.Name, r.Date)
				if r.Daemons != "" && r.Daemons != "4" { // 4, one per rank, is the page's setting
					d += fmt.Sprintf(" (%s daemons)", r.Daemons)
				}
				ds = append(ds, d)
			}
		}
	}
	if len(ds) > 0 {
		fmt.Fprintf(b, "Runs: %s.\n", strings.Join(ds, "; "))
	}
}
