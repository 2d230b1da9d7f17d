package smarttd

import (
	"strings"
	"testing"
)

func TestDefaultYAMLIsValidAndComplete(t *testing.T) {
	c, err := Load(DefaultYAML)
	if err != nil {
		t.Fatal(err)
	}
	if c.API.Socket != "/run/smartt/smarttd.sock" || c.Listen.Port() != DefaultPort || c.UDP.BatchSize != 64 {
		t.Fatalf("defaults: %+v", c)
	}
	if int64(c.Transport.MaxMessage) != c.API.MaxMessage+12 {
		t.Fatalf("transport.max_message %d should leave room for the envelope over api.max_message %d", c.Transport.MaxMessage, c.API.MaxMessage)
	}
}

func TestConfigErrorsNameFieldAndRange(t *testing.T) {
	for doc, want := range map[string]string{
		"listen: 10.0.0.1:0\n":                    "listen",
		"log_level: loud\n":                       "log_level",
		"metrics: nocolon\n":                      "metrics",
		"shutdown_timeout: 1h\n":                  "shutdown_timeout",
		"udp:\n  carrier: pigeon\n":               "udp.carrier",
		"udp:\n  data_dscp: 64\n":                 "udp.data_dscp = 64: must be in 0..63",
		"udp:\n  batch_size: 0\n":                 "udp.batch_size = 0: must be in 1..1024",
		"udp:\n  ev_port_base: 65500\n":           "udp.ev_port_base",
		"udp:\n  ev_port_base: 23500\n":           "must not contain the listen port",
		"api:\n  max_clients: 0\n":                "api.max_clients = 0: must be in 1..65536",
		"api:\n  max_message: 0\n":                "api.max_message = 0: must be in 1..",
		"api:\n  max_outstanding: 5\n":            "api.max_outstanding = 5",
		"transport:\n  mtu: 10\n":                 "transport.mtu = 10: must be in 64..",
		"transport:\n  cc: nope\n":                "transport.cc = \"nope\": must be one of",
		"transport:\n  mtu: 65440\n":              "transport.mtu = 65440: with the 96-byte smartt header and authentication trailer a packet is 65536 bytes, over the 65507-byte UDP limit: must be at most 65411",
		"bogus: 1\n":                              "bogus",
		"listen: 0.0.0.0:23600\nudp:\n  mtu: 1\n": "mtu",
	} {
		_, err := Load([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to contain %q", doc, err, want)
		}
	}
}
