package transport

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/cc"
)

// TestConfigIsOnlyYAML: every field of Config is a YAML key, none a driver's hook (a
// function, an interface, or a field tagged "-"): those belong in Hooks.
func TestConfigIsOnlyYAML(t *testing.T) {
	ct := reflect.TypeOf(Config{})
	for i := range ct.NumField() {
		f := ct.Field(i)
		if !f.IsExported() {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "-" || f.Type.Kind() == reflect.Func || f.Type.Kind() == reflect.Interface {
			t.Errorf("Config.%s (yaml %q, %v) is no YAML key: move it to Hooks", f.Name, key, f.Type)
		}
	}
}

// TestNewEndpointHooks: the hooks passed reach the engine (a caller's controller is the
// one its connections get), the missing ones are filled from the configuration, more than
// one Hooks is refused, and the ID shard numbers are checked at and beyond their limits.
func TestNewEndpointHooks(t *testing.T) {
	rng := func() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }
	mine := &cc.Fixed{Bytes: 12345}
	e, err := NewEndpoint(DefaultConfig(), rng(), Hooks{NewCC: func() cc.Controller { return mine }})
	if err != nil {
		t.Fatal(err)
	}
	h := e.Hooks()
	if h.NewCC() != mine || h.NewBalancer == nil || h.Buffers == nil {
		t.Fatalf("hooks not resolved: NewCC gives the caller's %v, NewBalancer %v, Buffers %v",
			h.NewCC() == mine, h.NewBalancer != nil, h.Buffers != nil)
	}
	plain, err := NewEndpoint(DefaultConfig(), rng())
	if err != nil {
		t.Fatal(err)
	}
	if reflect.TypeOf(plain.Hooks().NewCC()) == reflect.TypeOf(mine) {
		t.Fatal("without hooks the configured controller was not used")
	}
	if _, err := NewEndpoint(DefaultConfig(), rng(), Hooks{}, Hooks{}); err == nil || !strings.Contains(err.Error(), "at most one Hooks") {
		t.Fatalf("two Hooks: %v", err)
	}
	for _, ok := range [][2]int{{256, 255}, {256, 0}, {2, 1}, {1, 0}, {0, 0}} {
		if _, err := NewEndpoint(DefaultConfig(), rng(), Hooks{IDShards: ok[0], IDShard: ok[1]}); err != nil {
			t.Errorf("IDShards %d, IDShard %d: %v", ok[0], ok[1], err)
		}
	}
}
