package hwprofile

import (
	"strings"
	"testing"
)

type costly struct{ c Cost }

func (x costly) Cost() Cost { return x.c }

func TestLookup(t *testing.T) {
	for _, n := range []string{"cx6dx", "fpga-reps"} {
		p, err := Lookup(n)
		if err != nil || p.Name != n || !p.IntegerOnly || p.StateBytes <= 0 || p.DecisionNs <= 0 {
			t.Fatalf("%s: %+v %v", n, p, err)
		}
	}
	if _, err := Lookup("cx7"); err == nil || !strings.Contains(err.Error(), "cx6dx, fpga-reps") {
		t.Fatalf("unknown profile: %v", err)
	}
}

func TestCheckNamesTheBudget(t *testing.T) {
	p, _ := Lookup("cx6dx")
	if err := p.Check(Cost{Name: "ok", StateBytes: 256, GlobalBytes: 1000, Ops: 149, IntegerOnly: true}); err != nil {
		t.Fatal(err)
	}
	err := p.Check(Cost{Name: "fat", StateBytes: 257, GlobalBytes: 1 << 20, IntegerOnly: false})
	for _, want := range []string{"per-flow state budget of 256 B", "global memory budget of 65536 B", "integer-only", `"fat"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	ok, why := p.Fits(Cost{StateBytes: 10, Ops: 200, IntegerOnly: true}, 2500)
	if ok || !strings.Contains(why, "ops 200>150") || !strings.Contains(why, "2500>2000 ns") {
		t.Errorf("fits %v %q", ok, why)
	}
}

func TestCheckPair(t *testing.T) {
	p, _ := Lookup("fpga-reps")
	cc := costly{Cost{Name: "cc", StateBytes: 40, IntegerOnly: true}}
	lb := costly{Cost{Name: "lb", StateBytes: 20, IntegerOnly: true}}
	if err := p.CheckPair("cc", cc, "lb", lb); err != nil {
		t.Fatal(err)
	}
	lb.c.StateBytes = 30
	err := p.CheckPair("cc", cc, "lb", lb)
	if err == nil || !strings.Contains(err.Error(), "per-flow state 70 B") || !strings.Contains(err.Error(), "budget of 64 B") {
		t.Fatalf("over budget: %v", err)
	}
	err = p.CheckPair("cc", cc, "mystery", struct{}{})
	if err == nil || !strings.Contains(err.Error(), `lb "mystery"`) || !strings.Contains(err.Error(), "does not implement hwprofile.Coster") {
		t.Fatalf("non-Coster: %v", err)
	}
}
