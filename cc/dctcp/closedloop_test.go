package dctcp_test

import (
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/cctest"
	"github.com/smartt-transport/smartt/transport"
)

// TestIncastConverges: 8 senders, 8 MiB each, into one port with ECN marking (and
// trimming): every message completes within 1.5x ideal and the senders' shares over the
// first half of the incast are fair (Jain >= 0.9).
func TestIncastConverges(t *testing.T) {
	for _, name := range []string{"dctcp", "mprdma"} {
		t.Run(name, func(t *testing.T) {
			recs := make([]*cctest.Recorder, 8)
			r := cctest.New(t, cctest.Options{Senders: 8, Trim: true, Seed: 7,
				Mod: func(c *transport.Config) { c.CC = name },
				NewCC: func(i int) cc.Controller {
					reg, _ := transport.LookupCC(name)
					cfg := cctest.Config(true)
					cfg.CC = name
					f, err := reg.Prepare(&cfg)
					if err != nil {
						t.Fatal(err)
					}
					recs[i] = &cctest.Recorder{Controller: f(), Record: true}
					return recs[i]
				}})
			took, ideal := r.Incast(8 << 20)
			half := r.Net.Now() - took/2
			var shares []float64
			for _, f := range recs {
				shares = append(shares, float64(f.AckedAt(half)))
			}
			ps := r.Net.PortStats(r.RXAddr)
			j := cctest.Jain(shares)
			t.Logf("%s: %.3f x ideal, Jain %.3f over the first half, trims %d, marks %d", name, float64(took)/float64(ideal), j, ps.Trims, ps.Marks)
			if float64(took) > 1.5*float64(ideal) {
				t.Errorf("incast took %.3f x ideal", float64(took)/float64(ideal))
			}
			if j < 0.9 {
				t.Errorf("Jain %.3f", j)
			}
		})
	}
}
