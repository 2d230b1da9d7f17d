package smarttd

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/seal"
)

func TestDefaultYAMLIsValidAndComplete(t *testing.T) {
	c, err := Load(DefaultYAML)
	if err != nil {
		t.Fatal(err)
	}
	if c.API.Socket != "/run/smartt/smarttd.sock" || c.Listen.Port() != 23600 || c.UDP.BatchSize != 64 {
		t.Fatalf("defaults: %+v", c)
	}
	if int64(c.Transport.MaxMessage) != c.API.MaxMessage+12 {
		t.Fatalf("transport.max_message %d should leave room for the envelope over api.max_message %d", c.Transport.MaxMessage, c.API.MaxMessage)
	}
}

func TestConfigErrorsNameFieldAndRange(t *testing.T) {
	loadErrors(t, "", map[string]string{
		"listen: 10.0.0.1:0\n":                       "listen",
		"log_level: loud\n":                          "log_level",
		"metrics: nocolon\n":                         "metrics",
		"shutdown_timeout: 1h\n":                     "shutdown_timeout",
		"udp:\n  carrier: pigeon\n":                  "udp.carrier",
		"udp:\n  data_dscp: 64\n":                    "udp.data_dscp = 64: must be in 0..63",
		"udp:\n  batch_size: 0\n":                    "udp.batch_size = 0: must be in 1..1024",
		"udp:\n  ev_port_base: 65500\n":              "udp.ev_port_base",
		"udp:\n  ev_port_base: 23500\n":              "must not contain the listen port",
		"api:\n  max_clients: 0\n":                   "api.max_clients = 0: must be in 1..65536",
		"api:\n  max_control_conns: 0\n":             "api.max_control_conns = 0: must be in 1..65536",
		"api:\n  max_control_conns: 65537\n":         "api.max_control_conns = 65537: must be in 1..65536",
		"api:\n  max_message: 0\n":                   "api.max_message = 0: must be in 1..",
		"api:\n  max_outstanding: 5\n":               "api.max_outstanding = 5",
		"api:\n  max_outstanding_total: 1024\n":      "api.max_outstanding_total = 1024: must be in max_outstanding (2147483648)..",
		"api:\n  max_recv_queue: 0\n":                "api.max_recv_queue = 0: must be in 1..",
		"api:\n  max_recv_queue_total: 1048576\n":    "api.max_recv_queue_total = 1048576: must be in max(max_recv_queue, max_message) (1073741824)..",
		"api:\n  socket_buffer: 4095\n":              "api.socket_buffer = 4095: must be 0 (the kernel's default) or in 4096..67108864 bytes",
		"api:\n  socket_buffer: 67108865\n":          "api.socket_buffer = 67108865: must be 0",
		"api:\n  read_timeout: 5ms\n":                "api.read_timeout = 5ms: must be in 10ms..10m",
		"api:\n  header_timeout: 11m\n":              "api.header_timeout = 11m0s: must be in 10ms..10m",
		"api:\n  write_timeout: 0s\n":                "api.write_timeout = 0s: must be in 10ms..1h",
		"api:\n  idle_timeout: 25h\n":                "api.idle_timeout = 25h0m0s: must be in 10ms..24h",
		"api:\n  idle_timeout: 30\n":                 "api.idle_timeout: 30 has no unit; write 30us (or 30ms)",
		"shutdown_timeout: 500us\n":                  "shutdown_timeout = 500us: must be 0 (fail outstanding messages at once) or in 1ms..10m",
		"transport:\n  min_rto: 500ns\n":             "transport.min_rto = 500ns: must be in 1us..10s",
		"transport:\n  min_rto: 11s\n":               "transport.min_rto = 11s: must be in 1us..10s",
		"transport:\n  max_rto: 61s\n":               "transport.max_rto = 1m1s: must be in min_rto (5ms)..60s",
		"transport:\n  max_rto: 1ms\n":               "transport.max_rto = 1ms: must be in min_rto (5ms)..60s",
		"transport:\n  initial_rto: 1ms\n":           "transport.initial_rto = 1ms: must be in min_rto (5ms)..max_rto (200ms)",
		"transport:\n  mtu: 10\n":                    "transport.mtu = 10: must be in 64..",
		"transport:\n  recv_budget: 1048576\n":       "transport.recv_budget = 1048576: must be in max_message (1073741836)..",
		"transport:\n  recv_budget: 2199023255553\n": "transport.recv_budget = 2199023255553: must be in",
		"transport:\n  unproven_timeout: 6s\n":       "transport.unproven_timeout = 6s: must be in 1ms..idle_timeout (5s)",
		"transport:\n  unproven_timeout: 999us\n":    "transport.unproven_timeout = 999us: must be in 1ms..",
		"transport:\n  idle_timeout: 25h\n":          "transport.idle_timeout = 25h0m0s: must be in 1ms..24h",
		"transport:\n  time_wait: 11m\n":             "transport.time_wait = 11m0s: must be in 0..10m",
		"transport:\n  mtu: 65440\n":                 "transport.mtu = 65440: with the 100-byte smartt header and authentication trailer a packet is 65540 bytes, over the 65507-byte UDP limit: must be at most 65407",
		"transport:\n  cc: nope\n":                   "transport.cc = \"nope\": must be one of",
		"bogus: 1\n":                                 "bogus",
		"shards: 0\n":                                "shards: \"0\": must be in 1..256 or auto",
		"shards: 257\n":                              "shards: \"257\": must be in 1..256 or auto",
		"shards: many\n":                             "shards: \"many\": must be in 1..256 or auto",
		"udp:\n  shard_steering: ebpf\n":             "udp.shard_steering = \"ebpf\": must be cbpf or hash",
		"shards: 2\nudp:\n  datapath: afxdp\n":       "shards = 2 with udp.datapath = afxdp: the AF_XDP datapath takes one shard",
		"udp:\n  datapath: xdp\n":                    "udp.datapath = \"xdp\": must be sockets, afxdp or auto",
		"listen: 0.0.0.0:23600\nudp:\n  mtu: 1\n":    "mtu",
	})
}

// TestAuthKeyFiles: key files are read at load (mode 0600 enforced), keys never appear
// in the config view (smarttd -print-config prints the commented defaults; the API's
// status returns View), and errors name the field.
func TestAuthKeyFiles(t *testing.T) {
	dir := t.TempDir()
	hexKey := strings.Repeat("5a", 32)
	write := func(name, data string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("fabric.key", hexKey+"\n", 0o600)
	rack := write("rack.key", " "+strings.Repeat("a5", 32)+" ", 0o400)
	c, err := Load([]byte("transport:\n  auth:\n    mode: encrypt\n    key_file: " + good +
		"\n    peers:\n      - {prefix: 10.0.1.0/24, key_file: " + rack + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Transport.Auth
	if a.Mode != seal.Encrypt || a.Key[0] != 0x5a || a.Peers[0].Key[31] != 0xa5 || a.KeyFile != "" {
		t.Fatalf("keys not loaded: %v", a)
	}
	view, _ := json.Marshal(c.View())
	if strings.Contains(string(view), "5a5a") || strings.Contains(string(view), "a5a5") || !strings.Contains(string(view), "redacted") {
		t.Fatalf("view shows a key or no redaction: %s", view)
	}
	if _, err := transport.NewEndpoint(c.Transport, rand.New(rand.NewPCG(1, 1))); err != nil {
		t.Fatalf("engine with loaded keys: %v", err)
	}
	for doc, want := range map[string]string{
		"key_file: " + write("open.key", hexKey, 0o644):                  "transport.auth.key_file = \"" + filepath.Join(dir, "open.key") + "\": mode 0644: must not be accessible",
		"key_file: " + write("short.key", "abcd", 0o600):                 "transport.auth.key_file",
		"key_file: " + filepath.Join(dir, "missing.key"):                 "no such file",
		"key_file: " + good + "\n    key: " + hexKey:                     "transport.auth.key and transport.auth.key_file: give one of them",
		"peers: [{prefix: 10.0.2.0/24, key_file: " + dir + "/nope.key}]": "transport.auth.peers[0].key_file",
		"mode: auth": "transport.auth.mode = auth: needs auth.key",
		"mode: on":   "must be off, auth or encrypt",
		"mode: auth\n    key: " + hexKey + "\n    max_sessions: 1":                                     "transport.auth.max_sessions = 1: must be in 16..",
		"mode: auth\n    key: " + hexKey + "\n    rekey_interval: 100ms":                               "transport.auth.rekey_interval = 100ms: must be in 1s..24h",
		"mode: auth\n    key: " + hexKey + "\n    peers: [{prefix: 10.0.1.1/24, key: " + hexKey + "}]": "did you mean 10.0.1.0/24",
	} {
		_, err := Load([]byte("transport:\n  auth:\n    " + doc + "\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error containing %q", doc, err, want)
		}
		if err != nil && strings.Contains(err.Error(), hexKey) {
			t.Errorf("%q: the error shows the key: %v", doc, err)
		}
	}
}

// A review finding: a duration without a unit was nanoseconds, so `min_rto: 5`,
// `max_rto: 200` and `shutdown_timeout: 10` were accepted as 5 ns, 200 ns and 10 ns. Now
// each is an error naming the field and the unit to add.
func TestDurationWithoutUnitIsAnErrorNamingTheField(t *testing.T) {
	loadErrors(t, "", map[string]string{
		"transport:\n  min_rto: 5\n":                    "transport.min_rto: 5 has no unit; write 5us (or 5ms)",
		"transport:\n  max_rto: 200\n":                  "transport.max_rto: 200 has no unit; write 200us (or 200ms)",
		"shutdown_timeout: 10\n":                        "shutdown_timeout: 10 has no unit; write 10us (or 10ms)",
		"transport:\n  reps:\n    freeze_duration: 7\n": "transport.reps.freeze_duration: 7 has no unit",
		"transport:\n  ack:\n    max_delay: 10\n":       "transport.ack.max_delay: 10 has no unit",
	})
	// At the RTO limits.
	for _, doc := range []string{"transport: {recv_budget: 1073741836, unproven_timeout: 5s, time_wait: 10m}\n",
		"transport: {recv_budget: 1099511627776, idle_timeout: 1ms, unproven_timeout: 1ms, time_wait: 0s}\n", "transport: {min_rto: 1us, initial_rto: 1us, max_rto: 1us}\n",
		"transport: {min_rto: 10s, initial_rto: 60s, max_rto: 60s}\n", "shutdown_timeout: 1ms\n", "shutdown_timeout: 10m\n",
		"api: {header_timeout: 10ms, read_timeout: 10m, write_timeout: 1h, idle_timeout: 24h}\n",
		"api: {max_recv_queue: 1, max_recv_queue_total: 1073741824, max_outstanding: 1073741824, max_outstanding_total: 1073741824}\n"} {
		if _, err := Load([]byte(doc)); err != nil {
			t.Errorf("%q: %v", doc, err)
		}
	}
	// 0 needs no unit; with units everything loads.
	c, err := Load([]byte("shutdown_timeout: 0\ntransport:\n  min_rto: 5us\n  initial_rto: 200us\n  max_rto: 200ms\n"))
	if err != nil || c.ShutdownTimeout != 0 || c.Transport.MinRTO != 5_000 {
		t.Fatalf("got %v, %v", c.Transport.MinRTO, err)
	}
}

// TestConfigINTControllers: the daemon selects hpcc only with transport.int (the switches
// stamp INT) and then reserves the INT block in its datagrams; fixed_rate takes its rate
// in either form.
func TestConfigINTControllers(t *testing.T) {
	if _, err := Load([]byte("transport:\n  cc: hpcc\n")); err == nil || !strings.Contains(err.Error(), "int = false") {
		t.Fatalf("hpcc without int: %v", err)
	}
	c, err := Load([]byte("transport:\n  cc: hpcc\n  int: true\n  hpcc: {eta: 0.9}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.MaxDatagram(), c.Transport.MTU+64+4+16*5; got != want {
		t.Fatalf("MaxDatagram with INT %d, want %d (header and a 5-slot INT block)", got, want)
	}
	if u := UDPConfigFor(&c, nil); u.HeaderBytes != 64+84 {
		t.Fatalf("HeaderBytes %d with INT", u.HeaderBytes)
	}
	for _, doc := range []string{"fixed_rate: {fraction: 0.5}", "fixed_rate: {coefficient: 1.2, fair_share_flows: 8}"} {
		if _, err := Load([]byte("transport:\n  cc: fixed_rate\n  " + doc + "\n")); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
	}
	if _, err := Load([]byte("transport:\n  cc: fixed_rate\n  fixed_rate: {coefficient: 1.2}\n")); err == nil || !strings.Contains(err.Error(), "fair_share_flows") {
		t.Fatalf("coefficient without flows: %v", err)
	}
}

// TestShardsKey: shards defaults to 1, takes a count or auto (GOMAXPROCS), and prints back
// as it was written.
func TestShardsKey(t *testing.T) {
	c := DefaultConfig()
	if c.Shards != 1 || c.Shards.N() != 1 || c.UDP.ShardSteering != "cbpf" {
		t.Fatalf("defaults: shards %v (%d), steering %q", c.Shards, c.Shards.N(), c.UDP.ShardSteering)
	}
	for doc, want := range map[string]string{"shards: 4\n": "4", "shards: auto\n": "auto"} {
		c, err := Load([]byte(doc))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if c.Shards.String() != want {
			t.Errorf("%q: shards %v", doc, c.Shards)
		}
		b, err := json.Marshal(c.View())
		if err != nil || !strings.Contains(string(b), `"shards":`) {
			t.Errorf("%q: view %s (%v) lacks shards", doc, b, err)
		}
	}
	c, _ = Load([]byte("shards: auto\n"))
	if n := c.Shards.N(); n < 1 || n > MaxShards {
		t.Errorf("auto: %d shards", n)
	}
}

// udp.datapath auto is valid with any shards, and resolves to udp's auto (AF_XDP where the
// interface fits) only for per-packet spraying on one shard; sockets, with the reason,
// otherwise. sockets and afxdp resolve to themselves.
func TestResolveDatapath(t *testing.T) {
	for doc, want := range map[string]string{
		"udp:\n  datapath: auto\n":                                  "auto",
		"udp:\n  datapath: auto\ntransport:\n  lb: ops\n":           "auto",
		"udp:\n  datapath: auto\ntransport:\n  lb: ecmp\n":          "sockets",
		"udp:\n  datapath: auto\ntransport:\n  lb: plb\n":           "sockets",
		"udp:\n  datapath: auto\ntransport:\n  reps:\n    run: 4\n": "sockets",
		"shards: 2\nudp:\n  datapath: auto\n":                       "sockets",
		"udp:\n  datapath: afxdp\ntransport:\n  lb: ecmp\n":         "afxdp",
		"udp:\n  datapath: sockets\n":                               "sockets",
		"":                                                          "sockets",
	} {
		c, err := Load([]byte(doc))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		dp, why := c.ResolveDatapath()
		if dp != want || why == "" {
			t.Errorf("%q: datapath %q (%s), want %q", doc, dp, why, want)
		}
	}
}

// reps.run auto resolves on the socket layer the daemon opened: the run that fills one
// UDP GSO send on the sockets datapath (15 datagrams of mtu 4108 + 100 bytes; 44 at mtu
// 1372; 1 when one datagram nearly fills it), also without GSO on the port carrier (a
// run is one sendmmsg on its EV's socket); 1 on AF_XDP, on the raw carrier, on a
// non-UDP socket layer and without GSO on the flowlabel carrier. A number is kept.
func TestResolveRun(t *testing.T) {
	for _, tc := range []struct {
		doc, dp string
		gso     bool
		want    int
	}{
		{"", "sockets", true, 15},
		{"", "sockets", false, 15},
		{"transport:\n  mtu: 1372\n", "sockets", true, 44},
		{"transport:\n  mtu: 61452\n", "sockets", true, 1},
		{"transport:\n  mtu: 64\n", "sockets", true, 64},
		{"transport:\n  reps:\n    run: auto\n", "afxdp", false, 1},
		{"", "", false, 1},
		{"listen: 127.0.0.1:23600\nudp:\n  carrier: raw\n", "sockets", false, 1},
		{"listen: '[::1]:23600'\nudp:\n  carrier: flowlabel\n", "sockets", false, 1},
		{"listen: '[::1]:23600'\nudp:\n  carrier: flowlabel\n", "sockets", true, 15},
		{"transport:\n  reps:\n    run: 4\n", "sockets", true, 4},
		{"transport:\n  reps:\n    run: 4\n", "afxdp", false, 4},
		{"transport:\n  reps:\n    run: 1\n", "sockets", true, 1},
		{"transport:\n  lb: ecmp\n", "sockets", true, 15},
	} {
		c, err := Load([]byte(tc.doc))
		if err != nil {
			t.Fatalf("%q: %v", tc.doc, err)
		}
		got, why := c.ResolveRun(tc.dp, tc.gso)
		if got != tc.want || why == "" {
			t.Errorf("%q on %q (gso %v): run %d (%s), want %d", tc.doc, tc.dp, tc.gso, got, why, tc.want)
		}
		if auto := c.Transport.REPS.Run == 0; auto != strings.HasPrefix(why, "auto: ") {
			t.Errorf("%q: why %q for run %v", tc.doc, why, c.Transport.REPS.Run)
		}
	}
	if c := DefaultConfig(); c.Transport.REPS.Run != 0 || transport.DefaultConfig().REPS.Run != 0 {
		t.Fatalf("default reps.run %v (engine %v), want auto in both", c.Transport.REPS.Run, transport.DefaultConfig().REPS.Run)
	}
	loadErrors(t, "", map[string]string{
		"transport:\n  reps:\n    run: 0\n":   `transport.reps.run: "0": must be in 1..64 or auto`,
		"transport:\n  reps:\n    run: 65\n":  `transport.reps.run: "65": must be in 1..64 or auto`,
		"transport:\n  reps:\n    run: gso\n": `transport.reps.run: "gso": must be in 1..64 or auto`,
		"transport:\n  reps:\n    run: [1]\n": `transport.reps.run`,
	})
}

// TestConfigCompleteDelay: the daemon holds completion ACKs 500 us by default;
// ack.complete_delay takes 0..1ms with a unit, and a value beyond is refused naming it.
func TestConfigCompleteDelay(t *testing.T) {
	if d := DefaultConfig().Transport.Ack.CompleteDelay; d != 500_000 {
		t.Fatalf("default ack.complete_delay %v, want 500us", d)
	}
	for doc, want := range map[string]config.Duration{"0": 0, "1ms": 1_000_000, "1ns": 1, "200us": 200_000} {
		c, err := Load([]byte("transport:\n  ack:\n    complete_delay: " + doc + "\n"))
		if err != nil || c.Transport.Ack.CompleteDelay != want {
			t.Errorf("complete_delay %s: %v, %v; want %v", doc, c.Transport.Ack.CompleteDelay, err, want)
		}
	}
	loadErrors(t, "transport:\n  ack:\n    complete_delay: ", map[string]string{"1001us": "ack.complete_delay = 1.001ms", "-1us": "ack.complete_delay = -1us",
		"500": "transport.ack.complete_delay: 500 has no unit"})
}

// TestConfigBusyPoll: udp.busy_poll is off by default and takes 0..1ms with a unit; a
// value beyond is refused naming it, and a valid one reaches the socket layer's config.
func TestConfigBusyPoll(t *testing.T) {
	if d := DefaultConfig().UDP.BusyPoll; d != 0 {
		t.Fatalf("default udp.busy_poll %v, want 0 (off)", d)
	}
	for doc, want := range map[string]config.Duration{"0s": 0, "1ms": 1_000_000, "1ns": 1, "50us": 50_000} {
		c, err := Load([]byte("udp:\n  busy_poll: " + doc + "\n"))
		if err != nil || c.UDP.BusyPoll != want {
			t.Errorf("busy_poll %s: %v, %v; want %v", doc, c.UDP.BusyPoll, err, want)
			continue
		}
		if got := UDPConfigFor(&c, nil).BusyPoll; got != time.Duration(want) {
			t.Errorf("busy_poll %s: the socket layer gets %v", doc, got)
		}
	}
	loadErrors(t, "udp:\n  busy_poll: ", map[string]string{"1001us": "udp.busy_poll = 1.001ms", "-1us": "udp.busy_poll = -1us",
		"5": "udp.busy_poll: 5 has no unit"})
}

// api.max_control_conns takes its range's ends and defaults to 256.
func TestConfigMaxControlConns(t *testing.T) {
	if c := DefaultConfig(); c.API.MaxControlConns != 256 {
		t.Errorf("default api.max_control_conns %d, want 256", c.API.MaxControlConns)
	}
	for _, n := range []int{1, 65536} {
		c, err := Load([]byte(fmt.Sprintf("api:\n  max_control_conns: %d\n", n)))
		if err != nil || c.API.MaxControlConns != n {
			t.Errorf("max_control_conns %d: %d, %v", n, c.API.MaxControlConns, err)
		}
	}
}

// loadErrors checks that each document, prefix+doc, fails to load with an error
// containing its want; a non-empty prefix is a section to which doc and a newline are
// the value.
func loadErrors(t *testing.T, prefix string, docs map[string]string) {
	t.Helper()
	for doc, want := range docs {
		full := doc
		if prefix != "" {
			full = prefix + doc + "\n"
		}
		if _, err := Load([]byte(full)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to contain %q", full, err, want)
		}
	}
}
