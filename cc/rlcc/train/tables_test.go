package train

import (
	"bytes"
	"strings"
	"testing"
)

// TestTablesFromCells: Table IV prints each controller's whole-run losses with the
// paper's value of the same column under it (a dash where the paper has no such
// column), and Table V's marks follow the runs: a controller losing packets in the
// measured window, or far below the best goodput, fails that test.
func TestTablesFromCells(t *testing.T) {
	c := DefaultTablesConfig()
	c.CCs, c.ManyToOne, c.TreeManyToOne, c.AllToAll = []string{"rlcc", "dcqcn"}, []int{32, 99}, []int{16}, []int{64}
	c.LongShort = c.LongShort[:1]
	tr := &tablesRun{c: c, cells: map[string]map[int]map[string]cell{}}
	good := cell{goodput: Spread{0.98, 0.97, 0.99}, loss: Spread{0, 0, 0}, allLoss: Spread{0.5, 0.4, 0.6}, extra: true}
	lossy := cell{goodput: Spread{0.98, 0.97, 0.99}, loss: Spread{3, 2, 4}, allLoss: Spread{40, 30, 50}, extra: true}
	slow := cell{goodput: Spread{0.5, 0.5, 0.5}, loss: Spread{0, 0, 0}, allLoss: Spread{0, 0, 0}, extra: true}
	for _, n := range c.ManyToOne {
		tr.put("m2o", n, "rlcc", good)
		tr.put("m2o", n, "dcqcn", good)
	}
	tr.put("tree-m2o", 16, "rlcc", good)
	tr.put("tree-m2o", 16, "dcqcn", slow)
	tr.put("a2a", 64, "rlcc", good)
	tr.put("a2a", 64, "dcqcn", lossy)
	tr.put("ls", 0, "rlcc", good)
	tr.put("ls", 0, "dcqcn", cell{goodput: Spread{0.9, 0.9, 0.9}, extra: false})
	var out bytes.Buffer
	tr.printTable4(&out)
	tr.printTable5(&out)
	s := out.String()
	for _, want := range []string{
		"| cc | many-to-one 32 | many-to-one 99 | all-to-all 64 | long-short 1/50 |",
		"| rlcc | 0.50 | 0.50 | 0.50 | 0.50 |",
		"| dcqcn (paper) | 0 | - | 225.1 | 0 |",
		"| rlcc | 3 of 4 | 3 of 3 |",
		"| dcqcn | 3 of 4 | 2 of 3 |",
		"| rlcc | yes | yes | yes | yes | yes |",
		"| dcqcn | yes | **no**: goodput 0.50 against the best 0.98 at 16 | **no**: 4.0 losses per flow in the window at 64 | **no**: 1/50: a short flow unfinished or the long flows not recovered | **no** |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %q in\n%s", want, s)
		}
	}
}
