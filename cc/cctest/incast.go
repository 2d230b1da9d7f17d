package cctest

import (
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/transport"
)

// IncastFairness is the closed-loop incast each controller's package checks: 8 senders x
// 8 MiB into one port with trimming and RED marking, every sender running the registered
// controller name (mod, if set, adjusts the transport config); every message must complete
// within 1.5x ideal and the bytes acknowledged over the first half of the incast must have
// a Jain index of at least minJain.
func IncastFairness(t *testing.T, name string, minJain float64, mod func(*transport.Config)) {
	t.Helper()
	r, recs := Recorded(t, name, Options{Senders: 8, Trim: true, Seed: 7}, mod)
	took, ideal := r.Incast(8 << 20)
	half := r.Net.Now() - took/2
	var shares []float64
	for _, f := range recs {
		shares = append(shares, float64(f.AckedAt(half)))
	}
	ps := r.Net.PortStats(r.RXAddr)
	j := Jain(shares)
	t.Logf("%s: %.3f x ideal, Jain %.3f over the first half, trims %d, marks %d", name, float64(took)/float64(ideal), j, ps.Trims, ps.Marks)
	if float64(took) > 1.5*float64(ideal) {
		t.Errorf("%s: incast took %.3f x ideal", name, float64(took)/float64(ideal))
	}
	if j < minJain {
		t.Errorf("%s: Jain %.3f over the first half, want >= %.2f", name, j, minJain)
	}
}

// Recorded builds a rig whose senders all run the registered controller name (mod, if
// set, adjusts the transport config), each wrapped in a Recorder that keeps its timeline.
// o's Mod and NewCC are set here.
func Recorded(t testing.TB, name string, o Options, mod func(*transport.Config)) (*Rig, []*Recorder) {
	t.Helper()
	reg, ok := transport.LookupCC(name)
	if !ok {
		t.Fatalf("cc %q is not registered", name)
	}
	recs := make([]*Recorder, o.Senders)
	o.Mod = func(c *transport.Config) {
		c.CC = name
		if mod != nil {
			mod(c)
		}
	}
	o.NewCC = func(i int) cc.Controller {
		cfg := Config(o.Trim)
		o.Mod(&cfg)
		f, err := reg.Prepare(&cfg)
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = &Recorder{Controller: f(), Record: true}
		return recs[i]
	}
	return New(t, o), recs
}
