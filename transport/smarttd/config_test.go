package smarttd

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"smartt/transport"
	"smartt/transport/seal"
)

func TestDefaultYAMLIsValidAndComplete(t *testing.T) {
	c, err := Load(DefaultYAML)
	if err != nil {
		t.Fatal(err)
	}
	if c.API.Socket != "/run/smartt/smarttd.sock" || c.Listen.Port() != 4791 || c.UDP.BatchSize != 64 {
		t.Fatalf("defaults: %+v", c)
	}
	if int64(c.Transport.MaxMessage) != c.API.MaxMessage+12 {
		t.Fatalf("transport.max_message %d should leave room for the envelope over api.max_message %d", c.Transport.MaxMessage, c.API.MaxMessage)
	}
}

func TestConfigErrorsNameFieldAndRange(t *testing.T) {
	for doc, want := range map[string]string{
		"listen: 10.0.0.1:0\n":                   "listen",
		"log_level: loud\n":                      "log_level",
		"metrics: nocolon\n":                     "metrics",
		"shutdown_timeout: 1h\n":                 "shutdown_timeout",
		"udp:\n  carrier: pigeon\n":              "udp.carrier",
		"udp:\n  data_dscp: 64\n":                "udp.data_dscp = 64: must be in 0..63",
		"udp:\n  batch_size: 0\n":                "udp.batch_size = 0: must be in 1..1024",
		"udp:\n  ev_port_base: 65500\n":          "udp.ev_port_base",
		"udp:\n  ev_port_base: 4700\n":           "must not contain the listen port",
		"api:\n  max_clients: 0\n":               "api.max_clients = 0: must be in 1..65536",
		"api:\n  max_message: 0\n":               "api.max_message = 0: must be in 1..",
		"api:\n  max_outstanding: 5\n":           "api.max_outstanding = 5",
		"transport:\n  mtu: 10\n":                "transport.mtu = 10: must be in 64..",
		"transport:\n  cc: nope\n":               "transport.cc = \"nope\": must be one of",
		"bogus: 1\n":                             "bogus",
		"listen: 0.0.0.0:4791\nudp:\n  mtu: 1\n": "mtu",
	} {
		_, err := Load([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to contain %q", doc, err, want)
		}
	}
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
