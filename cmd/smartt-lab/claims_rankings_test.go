package main

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/test/results"
)

var (
	decimalRe   = regexp.MustCompile(`\d+\.\d+`)
	regionRefRe = regexp.MustCompile(`ai-lb-[a-z0-9-]+`)
)

// regionNumbers returns every decimal number in the tables of the regions named.
func regionNumbers(regions []results.Region, names []string) []string {
	var out []string
	for _, r := range regions {
		for _, n := range names {
			if r.Name != n {
				continue
			}
			for _, line := range strings.Split(r.Body, "\n") {
				if strings.HasPrefix(line, "|") {
					out = append(out, decimalRe.FindAllString(line, -1)...)
				}
			}
		}
	}
	return out
}

// roundsTo says whether number v (a table's) rounds to quoted q at q's decimals.
func roundsTo(v, q string) bool {
	x, err1 := strconv.ParseFloat(v, 64)
	y, err2 := strconv.ParseFloat(q, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	d := len(q) - strings.IndexByte(q, '.') - 1
	p := math.Pow(10, float64(d))
	return math.Abs(math.Round(x*p)/p-y) < 0.5/p
}

// The "here" column of docs/results/ai-lb.md's rankings table is typed from the tables
// above it: every decimal number in it (not a percentage) must be a number of a table
// of the regions its row names (every ai-lb region when it names none), rounded as
// quoted, so a rerun that moves a number fails here and the row is revisited.
func TestDocsClaimsAILBRankings(t *testing.T) {
	root, regions := docsRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", "results", "ai-lb.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	i := strings.Index(page, "## Rankings: the study's against ours")
	if i < 0 {
		t.Fatal("no rankings section")
	}
	var all []string
	for _, r := range regions {
		if strings.HasPrefix(r.Name, "ai-lb-") {
			all = append(all, r.Name)
		}
	}
	checked := 0
	for _, line := range strings.Split(page[i:], "\n")[1:] {
		if strings.HasPrefix(line, "## ") {
			break
		}
		c := cells(line)
		if !strings.HasPrefix(line, "|") || len(c) != 4 || c[0] == "question" || strings.HasPrefix(c[0], "---") {
			continue
		}
		here := c[2]
		names := regionRefRe.FindAllString(here, -1)
		if len(names) == 0 {
			names = all
		}
		nums := regionNumbers(regions, names)
		for _, loc := range decimalRe.FindAllStringIndex(here, -1) {
			q := here[loc[0]:loc[1]]
			if strings.HasPrefix(strings.TrimSpace(here[loc[1]:]), "%") {
				continue
			}
			found := false
			for _, v := range nums {
				found = found || roundsTo(v, q)
			}
			if !found {
				t.Errorf("%s: %s is in no table of %v", c[0], q, names)
			}
			checked++
		}
	}
	t.Logf("checked %d", checked)
	if checked < 40 {
		t.Errorf("checked %d numbers of the rankings table, want its 40 or more", checked)
	}
}
