package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/test/logsink"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// badConfigs are configs -check-config must refuse, each with what its error must say:
// the key, the value and what is allowed (or the fix).
var badConfigs = []struct{ doc, want string }{
	{"transport:\n  min_rtoo: 1ms\n", "transport.min_rtoo: unknown key (line 2); did you mean min_rto?"},
	{"udp:\n  recv_bufer: 8MiB\n", "udp.recv_bufer: unknown key (line 2); did you mean recv_buffer?"},
	{"listen: 127.0.0.1\n", `listen: "127.0.0.1": not an ip:port; want ADDRESS:PORT such as 0.0.0.0:23600`},
	{"udp:\n  recv_buffer: 8XB\n", `udp.recv_buffer: "8XB" is not a size (want bytes or e.g. 8MiB, 4k, 1G, 1GB) (line 2)`},
	{"udp:\n  recv_buffer: 2GiB\n", "udp.recv_buffer = 2147483648: must be in 0..1073741824 bytes"},
	{"api:\n  max_message: 1.5B\n", `api.max_message: "1.5B" is 1.5 bytes, not a whole number`},
	{"api:\n  max_message: 2GiB\n", "api.max_message = 2147483648: must be in 1..1073741824 bytes"},
	{"transport:\n  min_rto: 5\n", "transport.min_rto: 5 has no unit; write 5us (or 5ms)"},
	{"transport:\n  min_rto: soon\n", `transport.min_rto: "soon" is not a duration (want e.g. 12us, 1.5ms, 10s)`},
	{"transport:\n  min_rto: 11s\n", "transport.min_rto = 11s: must be in 1us..10s"},
	{"transport:\n  link_rate: fast\n", `transport.link_rate: "fast" is not a rate (want e.g. 100Gbit, 800G, 25Mbit/s)`},
	{"transport:\n  mtu: 70000\n", "transport.mtu = 70000: with the 100-byte smartt header and authentication trailer a packet is 70100 bytes, over the 65507-byte UDP limit: must be at most 65407"},
	{"transport:\n  cc: nope\n", `transport.cc = "nope": must be one of bbr, `},
	{"transport:\n  profile: cx6dx\n", `transport.profile = "cx6dx" with transport.cc = "smartt": profile cx6dx: "smartt" uses floating point in its decision path: the profile is integer-only; with lb reps these fit: cc: smartt-fixed`},
	{"udp:\n  data_dscp: 64\n", "udp.data_dscp = 64: must be in 0..63"},
	{"udp:\n  data_dscp: 300\n", `udp.data_dscp: "300": must be in 0..255`},
	{"api:\n  max_clients: many\n", `api.max_clients: "many": want an integer`},
	{"shards: 257\n", `shards: "257": must be in 1..256 or auto`},
	{"log_format: xml\n", `log_format = "xml": must be text or json`},
	{"memory_limit: 1GiB\n", "exceeds memory_limit 1 GiB: set memory_fit: scale"},
	{"memory_fit: shrink\n", `memory_fit = "shrink": must be refuse or scale`},
	{"udp: [1, 2]\n", "udp: want a mapping of keys, not a sequence (line 1)"},
	{"transport:\n  cc: rlcc\n  rlcc:\n    policy: mlp\n", `rlcc.policy = "mlp": the float policy network is the simulator's and training's (smartt-lab)`},
}

// -check-config refuses each bad config with an error naming key, value and range, and
// every error of a config with several at once.
func TestCheckConfigRefuses(t *testing.T) {
	dir := t.TempDir()
	for i, bc := range badConfigs {
		f := filepath.Join(dir, "bad.yaml")
		os.WriteFile(f, []byte(bc.doc), 0o644)
		var out bytes.Buffer
		err := run([]string{"-check-config", f}, &out, nil)
		if err == nil || !strings.Contains(err.Error(), bc.want) {
			t.Errorf("%d: %q: error %v\nwant it to contain %q", i, bc.doc, err, bc.want)
		}
		for _, key := range []string{"transport.cc", "transport.mtu"} {
			if n := strings.Count(err.Error(), key); n > 1 {
				t.Errorf("%q: %s reported %d times (one error, one maximum)", bc.doc, key, n)
			}
		}
		if strings.Contains(err.Error(), "not found in type") || strings.Contains(err.Error(), "Config.") {
			t.Errorf("%q: error names Go identifiers: %v", bc.doc, err)
		}
	}
	f := filepath.Join(dir, "many.yaml")
	os.WriteFile(f, []byte("udp:\n  recv_bufer: 1\n  batch_size: x\ntransport:\n  min_rtoo: 1ms\n"), 0o644)
	err := run([]string{"-check-config", f}, new(bytes.Buffer), nil)
	for _, w := range []string{"udp.recv_bufer", "udp.batch_size", "transport.min_rtoo"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("several errors: %v lacks %s", err, w)
		}
	}
	// Refused keys do not hide the range errors of the keys that decoded, nor the reverse.
	// The profile is checked whenever the engine's own keys are valid (its controllers build).
	for doc, want := range map[string][]string{
		"udp:\n  recv_buffer: 8XB\n  data_dscp: 64\ntransport:\n  mtu: 70000\n  min_rtoo: 1ms\n": {
			`udp.recv_buffer: "8XB" is not a size`, "udp.data_dscp = 64", "transport.mtu = 70000", "transport.min_rtoo: unknown key"},
		"udp:\n  recv_buffer: 8XB\n  data_dscp: 64\ntransport:\n  profile: cx6dx\n": {
			`udp.recv_buffer: "8XB" is not a size`, "udp.data_dscp = 64", `transport.profile = "cx6dx" with transport.cc = "smartt"`},
	} {
		os.WriteFile(f, []byte(doc), 0o644)
		err = run([]string{"-check-config", f}, new(bytes.Buffer), nil)
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("decode and range errors: %v lacks %s", err, w)
			}
		}
	}
	// -print-config with -config checks that file instead of printing the defaults.
	if err := run([]string{"-config", f, "-print-config"}, new(bytes.Buffer), nil); err == nil {
		t.Error("-config BAD -print-config exited 0")
	}
}

// The shipped configs pass: the defaults, the DaemonSet's ConfigMap, and print the
// effective config with the worst-case memory.
func TestCheckConfigShipped(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../../deploy/kubernetes/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "  smarttd.yaml: |\n")
	j := strings.Index(s, "---\napiVersion: apps/v1")
	var cm []string
	for _, l := range strings.Split(s[i+len("  smarttd.yaml: |\n"):j], "\n") {
		cm = append(cm, strings.TrimPrefix(l, "    "))
	}
	files := map[string][]byte{"default.yaml": smarttd.DefaultYAML, "configmap.yaml": []byte(strings.Join(cm, "\n"))}
	for name, body := range files {
		f := filepath.Join(dir, name)
		os.WriteFile(f, body, 0o644)
		var out bytes.Buffer
		if err := run([]string{"-check-config", f}, &out, nil); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, w := range []string{"valid; the effective config", "listen: 0.0.0.0:23600", "# worst-case memory", "api.max_outstanding_total"} {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: output lacks %q", name, w)
			}
		}
	}
}

// The binary exits non-zero on a bad config and zero on a good one.
func TestCheckConfigExitStatus(t *testing.T) {
	dir := t.TempDir()
	bad, good := filepath.Join(dir, "bad.yaml"), filepath.Join(dir, "good.yaml")
	os.WriteFile(bad, []byte("transport: {min_rtoo: 1ms}\n"), 0o644)
	os.WriteFile(good, []byte("udp: {recv_buffer: 8MiB}\n"), 0o644)
	for f, wantOK := range map[string]bool{bad: false, good: true} {
		cmd := exec.Command(os.Args[0], "-check-config", f)
		cmd.Env = append(os.Environ(), "SMARTTD_TEST_MAIN=1")
		out, err := cmd.CombinedOutput()
		if (err == nil) != wantOK {
			t.Errorf("%s: exit %v, want ok=%v\n%s", f, err, wantOK, out)
		}
	}
}

// SIGHUP re-reads the config: log_level takes effect, other changes are logged as needing
// a restart, a broken file is logged, and the daemon runs on (it used to die). Logs are
// JSON with log_format: json.
func TestSIGHUPReloads(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "d.sock")
	cfgFile := filepath.Join(dir, "d.yaml")
	base := "listen: " + loopback + ":23602\nlog_format: json\nshutdown_timeout: 100ms\n"
	os.WriteFile(cfgFile, []byte(base+"log_level: info\n"), 0o644)
	cmd := exec.Command(os.Args[0], "-config", cfgFile, "-socket", sock)
	cmd.Env = append(os.Environ(), "SMARTTD_TEST_MAIN=1")
	var stderr logsink.Sink
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitFor(t, func() bool { return strings.Contains(stderr.String(), "smarttd started") })
	os.WriteFile(cfgFile, []byte(base+"log_level: debug\nudp: {batch_size: 32}\n"), 0o644)
	cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, func() bool { return strings.Contains(stderr.String(), "SIGHUP: config reloaded") })
	os.WriteFile(cfgFile, []byte(base+"transport: {min_rtoo: 1ms}\n"), 0o644)
	cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, func() bool { return strings.Contains(stderr.String(), "config not reloaded") })
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("daemon exit after SIGHUPs: %v\n%s", err, stderr.String())
	}
	out := stderr.String()
	for _, w := range []string{`"need_restart":"udp.batch_size"`, `"log_level":"debug"`, "did you mean min_rto", `"msg":"smarttd stopped"`} {
		if !strings.Contains(out, w) {
			t.Errorf("log lacks %q:\n%s", w, out)
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "{") {
			t.Errorf("log_format: json: line %q is not JSON", l)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}
