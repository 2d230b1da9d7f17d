// Command distill builds RL-CC's reference teacher model: it fits gradient-boosted
// oblivious trees (rlcc.DefaultFit) to the rule-based teacher policy rlcc.Teacher (written
// down from the paper's Table VI) and writes the model in smartt's JSON format. The
// embedded default is learned instead (smartt-lab rlcc train/distill, docs/rlcc.md);
// cc/rlcc/testdata/teacher_model.json is this command's output:
//
//	go run ./cc/rlcc/cmd/distill -o cc/rlcc/testdata/teacher_model.json
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/smartt-transport/smartt/cc/rlcc"
)

func main() {
	out := flag.String("o", "", "output file (default stdout)")
	fc := rlcc.DefaultFit
	flag.IntVar(&fc.Trees, "trees", fc.Trees, "boosting iterations")
	flag.IntVar(&fc.Depth, "depth", fc.Depth, "tree depth")
	flag.IntVar(&fc.Samples, "samples", fc.Samples, "training observations")
	flag.Uint64Var(&fc.Seed, "seed", fc.Seed, "sampler seed")
	flag.Parse()
	m, err := rlcc.Distill(fc)
	if err == nil {
		var b []byte
		if b, err = m.Marshal(); err == nil {
			if *out == "" {
				_, err = os.Stdout.Write(b)
			} else {
				err = os.WriteFile(*out, b, 0o644)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "distill:", err)
		os.Exit(1)
	}
}
