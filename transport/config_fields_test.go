package transport

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/smartt-transport/smartt/config"
)

// configField is one YAML key of Config with its Go field.
type configField struct {
	key, name string
	index     int
}

// configFields lists Config's YAML keys (none is tagged "-": TestConfigIsOnlyYAML).
func configFields() []configField {
	var fs []configField
	t := reflect.TypeOf(Config{})
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if key == "-" || !f.IsExported() {
			continue
		}
		if key == "" {
			key = strings.ToLower(f.Name)
		}
		fs = append(fs, configField{key: key, name: f.Name, index: i})
	}
	return fs
}

// daemonDefaults decodes the transport section of the daemon's default.yaml onto
// DefaultConfig and returns it with the keys the section sets.
func daemonDefaults(t *testing.T) (Config, []string) {
	t.Helper()
	b, err := os.ReadFile("smarttd/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Transport yaml.Node `yaml:"transport"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := 0; i < len(doc.Transport.Content); i += 2 {
		keys = append(keys, doc.Transport.Content[i].Value)
	}
	sub, err := yaml.Marshal(&doc.Transport)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	if err := config.DecodeYAML(sub, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg, keys
}

// docsDefaults returns the Go field names in the first column of docs/engine.md's
// Defaults table ("InitialRTO / MinRTO / MaxRTO" names three).
func docsDefaults(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/engine.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, _ := strings.Cut(string(b), "\n## Defaults\n")
	sec, _, _ = strings.Cut(sec, "\n## ")
	var names []string
	row := regexp.MustCompile(`(?m)^\| ([^|]+) \|`)
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		for n := range strings.SplitSeq(m[1], "/") {
			names = append(names, strings.TrimSpace(n))
		}
	}
	return names
}

// daemonDiffers is the one list of the intended differences between the engine's
// defaults (DefaultConfig: the papers' fabric, what tests and the simulator start
// from) and the daemon's (transport/smarttd/default.yaml: a software datapath on a
// shared host), with why. TestConfigFieldsEverywhere fails on a difference not listed
// here and on a listed one that is gone.
var daemonDiffers = map[string]string{
	"mtu":           "4 KiB plus the daemon's 12-byte message envelope, so a 4 KiB message is one packet",
	"max_message":   "api.max_message plus the 12-byte envelope",
	"initial_rto":   "a software datapath on a shared host: RTO floors in milliseconds",
	"min_rto":       "as initial_rto",
	"hops_from_ttl": "the daemon's sockets report IP TTLs; the engine's other drivers may not",
	"trimming":      "the engine models the papers' trimming switches; a daemon assumes ordinary ones",
	"ack":           "htsim's ACK policy for sprayed traffic, and held completions (complete_delay)",
	"base_rtt":      "host stacks add tens of microseconds to a fabric's RTT",
	"reps":          "clean_evs: the daemon's coalesced ACKs report every clean EV",
}

// notInDefaultYAML are Config keys default.yaml leaves out, with why.
var notInDefaultYAML = map[string]string{
	"listen_port": "the daemon sets it from listen",
	"recovery":    "a block of its own: docs/engine.md, \"Loss recovery modes\"",
	"rlcc":        "controller parameters: their defaults are the cc packages' DefaultConfig (docs/cc.md, docs/rlcc.md)",
	"smartt":      "as rlcc", "dctcp": "as rlcc", "mprdma": "as rlcc", "swift": "as rlcc", "nscc": "as rlcc",
	"dcqcn": "as rlcc", "bbr": "as rlcc", "eqds": "as rlcc", "hpcc": "as rlcc", "fixed_rate": "as rlcc",
}

// configErrorCase is one value beyond its limit and the text its error must carry (the
// key, and its range where Validate gives one).
type configErrorCase struct {
	key  string
	mod  func(*Config)
	want string
}

// configErrorCases has a case for each key Validate or a controller's Prepare checks.
var configErrorCases = []configErrorCase{
	{"mtu", func(c *Config) { c.MTU = 63 }, "mtu = 63"},
	{"max_message", func(c *Config) { c.MaxMessage = 0 }, "max_message = 0"},
	{"recv_window", func(c *Config) { c.RecvWindow = 0 }, "recv_window = 0"},
	{"recv_budget", func(c *Config) { c.RecvBudget = 0 }, "recv_budget = 0"},
	{"psn_window", func(c *Config) { c.PSNWindow = 0 }, "psn_window = 0"},
	{"reorder_threshold", func(c *Config) { c.ReorderThreshold = 0 }, "reorder_threshold = 0"},
	{"min_rto", func(c *Config) { c.MinRTO = 0 }, "min_rto = "},
	{"max_rto", func(c *Config) { c.MaxRTO = 61_000_000_000 }, "max_rto = "},
	{"initial_rto", func(c *Config) { c.InitialRTO = 1 }, "initial_rto = "},
	{"fixed_rto", func(c *Config) { c.FixedRTO = 11_000_000_000 }, "fixed_rto = "},
	{"max_retransmits", func(c *Config) { c.MaxRetransmits = -1 }, "max_retransmits = -1"},
	{"max_trims", func(c *Config) { c.MaxTrims = -1 }, "max_trims = -1"},
	{"idle_timeout", func(c *Config) { c.IdleTimeout = 0 }, "idle_timeout = "},
	{"unproven_timeout", func(c *Config) { c.UnprovenTimeout = -1 }, "unproven_timeout = "},
	{"time_wait", func(c *Config) { c.TimeWait = -1 }, "time_wait = "},
	{"max_conns", func(c *Config) { c.MaxConns = 0 }, "max_conns = 0"},
	{"max_time_wait", func(c *Config) { c.MaxTimeWait = -1 }, "max_time_wait = -1"},
	{"close_retries", func(c *Config) { c.CloseRetries = -1 }, "close_retries = -1"},
	{"return_to_sender", func(c *Config) { c.ReturnToSender, c.Trimming = true, false }, "return_to_sender = true needs trimming"},
	{"trim_dscp", func(c *Config) { c.TrimDSCP = 64 }, "trim_dscp = 64"},
	{"evs", func(c *Config) { c.EVS = 1<<16 + 1 }, "evs = 65537: must be in 1..65536"},
	{"pacing_burst", func(c *Config) { c.PacingBurst = -1 }, "pacing_burst = -1"},
	{"int_hops", func(c *Config) { c.INTHops = -1 }, "int_hops = -1"},
	{"int", func(c *Config) { c.INT, c.MTU = true, MaxMTU }, "with int = true"},
	{"initial_window", func(c *Config) { c.InitialWindow = 1 }, "initial_window = 1"},
	{"link_rate", func(c *Config) { c.LinkRate = 0 }, "link_rate"},
	{"base_rtt", func(c *Config) { c.BaseRTT = 0 }, "base_rtt"},
	{"cc", func(c *Config) { c.CC = "nope" }, `cc = "nope": must be one of`},
	{"lb", func(c *Config) { c.LB = "nope" }, `lb = "nope": must be one of`},
	{"reps", func(c *Config) { c.REPS.Entries = 9 }, "reps.entries"},
	{"ack", func(c *Config) { c.Ack.SackWords = 0 }, "ack."},
	{"recovery", func(c *Config) { c.Recovery.Mode = "nope" }, "recovery.mode"},
	{"auth", func(c *Config) { c.Auth.Mode = 9 }, "auth.mode"},
	// The controllers' parameters, checked by their Prepare (these cases were copied
	// into each cc package's own TestConfigErrors).
	{"bbr", func(c *Config) { c.CC, c.BBR.BwWindowRounds = "bbr", 1 }, "bbr.bw_window_rounds = 1: must be in 2..1000"},
	{"bbr", func(c *Config) { c.CC, c.BBR.CwndGain = "bbr", 0.5 }, "bbr.cwnd_gain = 0.5"},
	{"bbr", func(c *Config) { c.CC, c.BBR.ProbeRTTTime = "bbr", 0 }, "bbr.probe_rtt_time"},
	{"dcqcn", func(c *Config) { c.CC, c.DCQCN.GShift = "dcqcn", 0 }, "dcqcn.g_shift = 0: must be in 1..12"},
	{"dcqcn", func(c *Config) { c.CC, c.DCQCN.RateTimer = "dcqcn", 10 }, "dcqcn.rate_timer"},
	{"dcqcn", func(c *Config) { c.CC, c.DCQCN.AIRate = "dcqcn", 1 }, "dcqcn.ai_rate"},
	{"dcqcn", func(c *Config) { c.CC, c.DCQCN.ByteCounter = "dcqcn", 1 }, "dcqcn.byte_counter = 1"},
	{"dctcp", func(c *Config) { c.CC, c.DCTCP.GShift = "dctcp", 0 }, "dctcp.g_shift = 0: must be in 1..10"},
	{"dctcp", func(c *Config) { c.CC, c.DCTCP.MaxWindowBDP = "dctcp", 0 }, "dctcp.max_window_bdp = 0"},
	{"dctcp", func(c *Config) { c.CC, c.DCTCP.InitialWindowBDP = "dctcp", 2 }, "dctcp.initial_window_bdp = 2"},
	{"dctcp", func(c *Config) { c.CC, c.DCTCP.MinWindowMTUs = "dctcp", 0 }, "dctcp.min_window_mtus = 0"},
	{"mprdma", func(c *Config) { c.CC, c.MPRDMA.GShift = "mprdma", 0 }, "mprdma.g_shift = 0"},
	{"nscc", func(c *Config) { c.CC, c.NSCC.Gamma = "nscc", 2 }, "nscc.gamma = 2: must be in 0.01..1"},
	{"nscc", func(c *Config) { c.CC, c.NSCC.AdjustMTUs = "nscc", 0 }, "nscc.adjust_mtus = 0"},
	{"nscc", func(c *Config) { c.CC, c.NSCC.QAGateShift = "nscc", 17 }, "nscc.qa_gate_shift = 17"},
	{"nscc", func(c *Config) { c.CC, c.NSCC.TargetRTTs = "nscc", 0.01 }, "nscc.target_rtts = 0.01"},
	{"swift", func(c *Config) { c.CC, c.Swift.Beta = "swift", 0 }, "swift.beta = 0: must be in 0.01..1"},
	{"swift", func(c *Config) { c.CC, c.Swift.MaxMDF = "swift", 1 }, "swift.max_mdf = 1"},
	{"swift", func(c *Config) { c.CC, c.Swift.FSMaxCwnd = "swift", 0.05 }, "swift.fs_max_cwnd = 0.05"},
	{"swift", func(c *Config) { c.CC, c.Swift.Hops = "swift", -1 }, "swift.hops = -1"},
	{"swift", func(c *Config) { c.CC, c.Swift.RetxResetThreshold = "swift", 0 }, "swift.retx_reset_threshold = 0"},
	{"eqds", func(c *Config) { c.CC, c.EQDS.PullRate = "eqds", 1.01 }, "eqds.pull_rate"},
	{"hpcc", func(c *Config) { c.CC, c.INT, c.HPCC.Eta = "hpcc", true, 0.49 }, "hpcc.eta"},
	{"rlcc", func(c *Config) { c.CC, c.RLCC.Policy = "rlcc", "lstm" }, "rlcc.policy"},
}

// noErrorCase are the keys every value of which is valid, or whose checks live where named.
var noErrorCase = map[string]string{
	"unordered": "a bool", "hops_from_ttl": "a bool", "trimming": "a bool (return_to_sender's case covers its pairing)",
	"listen_port": "any port; 0 means the source port",
	"profile":     "checked by NewEndpoint against the built controller and balancer (profile_test.go)",
	"smartt":      "its range checks are cc/smartt's own tests'",
	"fixed_rate":  "its range checks are cc/fixedrate's (TestParamsLimits there)",
}

// TestConfigFieldsEverywhere is the reflection test over Config (after quic-go's
// config_test.go): every YAML key is in the daemon's default.yaml, in docs/engine.md's
// Defaults table and in configErrorCases, or one of the lists above names it with its
// reason; the daemon's values differ from the engine's exactly where daemonDiffers says.
// A new field fails here until it is placed in each.
func TestConfigFieldsEverywhere(t *testing.T) {
	d, keys := daemonDefaults(t)
	e := DefaultConfig()
	docs := docsDefaults(t)
	dv, ev := reflect.ValueOf(d), reflect.ValueOf(e)
	seen := map[string]bool{}
	for _, f := range configFields() {
		seen[f.key] = true
		// check: a key lacking from a place must be named (missing), a difference must
		// be named (daemonDiffers); a named key that no longer needs it fails too.
		check := func(what string, lacks bool, named map[string]string) {
			if _, ok := named[f.key]; lacks != ok {
				t.Errorf("%s: %s %v, named in its list %v", f.key, what, lacks, ok)
			}
		}
		check("not in default.yaml", !slices.Contains(keys, f.key), notInDefaultYAML)
		if !slices.Contains(docs, f.name) {
			t.Errorf("%s: no row %s in docs/engine.md's Defaults table", f.key, f.name)
		}
		check("no error case", !slices.ContainsFunc(configErrorCases, func(c configErrorCase) bool { return c.key == f.key }), noErrorCase)
		dy, _ := yaml.Marshal(dv.Field(f.index).Interface())
		ey, _ := yaml.Marshal(ev.Field(f.index).Interface())
		check("daemon differs from engine", string(dy) != string(ey), daemonDiffers)
	}
	for _, m := range []map[string]string{daemonDiffers, notInDefaultYAML, noErrorCase} {
		for k := range m {
			if !seen[k] {
				t.Errorf("%s is named but is no Config key", k)
			}
		}
	}
}

// TestConfigErrorCases: each case's value is refused with an error naming it.
func TestConfigErrorCases(t *testing.T) {
	for _, tc := range configErrorCases {
		cfg := DefaultConfig()
		tc.mod(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.key, err, tc.want)
		}
	}
}
