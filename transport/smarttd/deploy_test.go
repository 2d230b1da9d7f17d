package smarttd_test

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/smartt-transport/smartt/transport/smarttd"
)

// The config shipped in the Kubernetes example is a valid smarttd config.
func TestDeployDaemonSetConfigLoads(t *testing.T) {
	b, err := os.ReadFile("../../deploy/kubernetes/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	found := false
	for {
		var doc struct {
			Kind string            `yaml:"kind"`
			Data map[string]string `yaml:"data"`
		}
		if err := dec.Decode(&doc); err != nil {
			break
		}
		if doc.Kind != "ConfigMap" {
			continue
		}
		found = true
		c, err := smarttd.Load([]byte(doc.Data["smarttd.yaml"]))
		if err != nil {
			t.Fatalf("ConfigMap smarttd.yaml: %v", err)
		}
		if c.Listen.Port() != smarttd.DefaultPort || c.API.Socket != "/run/smartt/smarttd.sock" {
			t.Fatalf("ConfigMap config: listen %v, socket %s", c.Listen, c.API.Socket)
		}
	}
	if !found {
		t.Fatal("no ConfigMap in daemonset.yaml")
	}
}
