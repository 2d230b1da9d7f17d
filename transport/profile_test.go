package transport_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/hwprofile"
	"github.com/smartt-transport/smartt/transport"
)

// bareCC reports no cost.
type bareCC struct{}

func (bareCC) OnAck(cc.Ack)      {}
func (bareCC) OnLoss(cc.Loss)    {}
func (bareCC) Window() int       { return 1 << 20 }
func (bareCC) PacingRate() int64 { return 0 }

type floatCC struct{ cc.Fixed }

func (floatCC) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "floaty", StateBytes: 16, Ops: 10, IntegerOnly: false}
}

type fatCC struct{ cc.Fixed }

func (fatCC) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "fat", StateBytes: 1000, IntegerOnly: true}
}

func TestProfileCheckedInNewEndpoint(t *testing.T) {
	rng := func() *rand.Rand { return rand.New(rand.NewPCG(1, 1)) }
	for _, prof := range []string{"cx6dx", "fpga-reps"} {
		for _, name := range []string{"fixed", "rlcc"} {
			cfg := transport.DefaultConfig()
			cfg.Profile, cfg.CC = prof, name
			if _, err := transport.NewEndpoint(cfg, rng()); err != nil {
				t.Errorf("%s under %s: %v", name, prof, err)
			}
		}
	}
	cases := []struct {
		ctl  cc.Controller
		prof string
		want string
	}{
		{&bareCC{}, "cx6dx", "does not implement hwprofile.Coster"},
		{&floatCC{}, "cx6dx", "integer-only"},
		{&fatCC{}, "cx6dx", "per-flow state budget of 256 B"},
		{&fatCC{}, "nic9000", "must be one of cx6dx, fpga-reps"},
	}
	for _, c := range cases {
		cfg := transport.DefaultConfig()
		cfg.Profile = c.prof
		ctl := c.ctl
		_, err := transport.NewEndpoint(cfg, rng(), transport.Hooks{NewCC: func() cc.Controller { return ctl }})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%T under %s: %v, want %q", c.ctl, c.prof, err, c.want)
		}
	}
	// Without a profile anything goes.
	cfg := transport.DefaultConfig()
	if _, err := transport.NewEndpoint(cfg, rng(), transport.Hooks{NewCC: func() cc.Controller { return &bareCC{} }}); err != nil {
		t.Fatal(err)
	}
	// A bad rlcc configuration is refused up front, naming the field.
	cfg = transport.DefaultConfig()
	cfg.CC = "rlcc"
	cfg.RLCC.Beta = -1
	if _, err := transport.NewEndpoint(cfg, rng()); err == nil || !strings.Contains(err.Error(), "rlcc.beta") {
		t.Fatalf("bad rlcc config: %v", err)
	}
}
