package nscc_test

import (
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/cctest"
	"github.com/smartt-transport/smartt/cc/nscc"
	"github.com/smartt-transport/smartt/transport"
)

// TestIncastConverges: 8 senders x 8 MiB into one port, trimming on: every message
// completes within 1.5x ideal and the shares over the first half are fair (Jain >= 0.9).
func TestIncastConverges(t *testing.T) {
	recs := make([]*cctest.Recorder, 8)
	cfg := cctest.Config(true)
	p, err := nscc.NewParams(cfg.NSCC, cfg.Network(), true)
	if err != nil {
		t.Fatal(err)
	}
	r := cctest.New(t, cctest.Options{Senders: 8, Trim: true, Seed: 7,
		Mod: func(c *transport.Config) { c.CC = "nscc" },
		NewCC: func(i int) cc.Controller {
			recs[i] = &cctest.Recorder{Controller: nscc.New(p), Record: true}
			return recs[i]
		}})
	took, ideal := r.Incast(8 << 20)
	var shares []float64
	for _, f := range recs {
		shares = append(shares, float64(f.AckedAt(r.Net.Now()-took/2)))
	}
	ps := r.Net.PortStats(r.RXAddr)
	j := cctest.Jain(shares)
	t.Logf("nscc: %.3f x ideal, Jain %.3f, trims %d", float64(took)/float64(ideal), j, ps.Trims)
	if float64(took) > 1.5*float64(ideal) {
		t.Errorf("incast took %.3f x ideal", float64(took)/float64(ideal))
	}
	if j < 0.9 {
		t.Errorf("Jain %.3f", j)
	}
}
