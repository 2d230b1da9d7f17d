package smarttd_test

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// daemonSetDocs are the ConfigMap's smarttd.yaml and the DaemonSet of the Kubernetes example.
type daemonSetSpec struct {
	Template struct {
		Spec struct {
			PriorityClassName string           `yaml:"priorityClassName"`
			Tolerations       []map[string]any `yaml:"tolerations"`
			Containers        []struct {
				Args      []string `yaml:"args"`
				Resources struct {
					Limits map[string]string `yaml:"limits"`
				} `yaml:"resources"`
			} `yaml:"containers"`
		} `yaml:"spec"`
	} `yaml:"template"`
}

func daemonSetDocs(t *testing.T) (string, daemonSetSpec) {
	t.Helper()
	b, err := os.ReadFile("../../deploy/kubernetes/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	var cm string
	var ds daemonSetSpec
	for {
		var doc struct {
			Kind string            `yaml:"kind"`
			Data map[string]string `yaml:"data"`
			Spec yaml.Node         `yaml:"spec"`
		}
		if err := dec.Decode(&doc); err != nil {
			break
		}
		switch doc.Kind {
		case "ConfigMap":
			cm = doc.Data["smarttd.yaml"]
		case "DaemonSet":
			if err := doc.Spec.Decode(&ds); err != nil {
				t.Fatal(err)
			}
		}
	}
	if cm == "" || len(ds.Template.Spec.Containers) == 0 {
		t.Fatal("no ConfigMap smarttd.yaml or no DaemonSet container in daemonset.yaml")
	}
	return cm, ds
}

// The config shipped in the Kubernetes example is a valid smarttd config.
func TestDeployDaemonSetConfigLoads(t *testing.T) {
	cm, _ := daemonSetDocs(t)
	c, err := smarttd.Load([]byte(cm))
	if err != nil {
		t.Fatalf("ConfigMap smarttd.yaml: %v", err)
	}
	if c.Listen.Port() != smarttd.DefaultPort || c.API.Socket != "/run/smartt/smarttd.sock" {
		t.Fatalf("ConfigMap config: listen %v, socket %s", c.Listen, c.API.Socket)
	}
}

// The DaemonSet's memory limit holds the worst case of its ConfigMap's config (else the
// daemon refuses to start, or the kubelet kills it before its own limits act); it runs
// as a node-critical pod on every node; /metrics is not on every interface.
func TestDeployDaemonSetMemory(t *testing.T) {
	cm, ds := daemonSetDocs(t)
	c, err := smarttd.Load([]byte(cm))
	if err != nil {
		t.Fatal(err)
	}
	ctr := ds.Template.Spec.Containers[0]
	limit, err := config.ParseSize(ctr.Resources.Limits["memory"])
	if err != nil {
		t.Fatalf("limits.memory: %v", err)
	}
	b := smarttd.WorstCaseMemory(&c)
	if b.Total > limit {
		t.Errorf("limits.memory %s is below the ConfigMap's worst case %s", config.HumanSize(limit), b)
	}
	if c.MemoryLimit != smarttd.MemoryLimitAuto || c.MemoryFit != smarttd.FitRefuse {
		t.Errorf("memory_limit %v, memory_fit %s: want auto and refuse (the limit is checked, nothing silently scaled)", c.MemoryLimit, c.MemoryFit)
	}
	if ds.Template.Spec.PriorityClassName != "system-node-critical" || len(ds.Template.Spec.Tolerations) == 0 {
		t.Errorf("priorityClassName %q, tolerations %v", ds.Template.Spec.PriorityClassName, ds.Template.Spec.Tolerations)
	}
	if strings.HasPrefix(c.Metrics, "0.0.0.0") || !strings.Contains(strings.Join(ctr.Args, " "), "-metrics $(NODE_IP):9464") {
		t.Errorf("metrics %q, args %v: want the node's own address", c.Metrics, ctr.Args)
	}
}

// The systemd unit sets no memory limit below the default config's worst case.
func TestDeployUnitMemory(t *testing.T) {
	b, err := os.ReadFile("../../deploy/systemd/smarttd.service")
	if err != nil {
		t.Fatal(err)
	}
	c := smarttd.DefaultConfig()
	bound := smarttd.WorstCaseMemory(&c)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "MemoryMax="); ok {
			n, err := config.ParseSize(v)
			if err != nil || n < bound.Total {
				t.Errorf("MemoryMax=%s (%v) below the default config's worst case %s", v, err, bound)
			}
		}
	}
}

// The unit's Documentation= file is installed by a step of docs/deploy.md and of the unit's
// own install comment; SIGHUP has an ExecReload=; AF_XDP's needs are written down.
func TestDeployUnitDocumentation(t *testing.T) {
	unit, err := os.ReadFile("../../deploy/systemd/smarttd.service")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	var path string
	for _, l := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(l, "Documentation=file://"); ok {
			path = v
		}
	}
	if path == "" {
		return // no local documentation named: nothing to install
	}
	step := "install -D -m 0644 docs/deploy.md " + path
	if !strings.Contains(string(doc), step) || !strings.Contains(string(unit), step) {
		t.Errorf("Documentation=file://%s: no %q in docs/deploy.md and the unit's install steps", path, step)
	}
	for _, w := range []string{"ExecReload=/bin/kill -HUP $MAINPID", "AF_XDP", "CAP_BPF"} {
		if !strings.Contains(string(unit), w) {
			t.Errorf("unit lacks %q", w)
		}
	}
	for _, w := range []string{"install -o smartt -g smartt -m 0600", "LoadCredential=", "36-byte authentication trailer",
		"AF_XDP", "supplementalGroups: [65532]", "system-node-critical"} {
		if !strings.Contains(string(doc), w) {
			t.Errorf("docs/deploy.md lacks %q", w)
		}
	}
	for _, bad := range []string{"root:smartt", "32 bytes", "adding the new key to all hosts first"} {
		if strings.Contains(string(doc), bad) {
			t.Errorf("docs/deploy.md still says %q", bad)
		}
	}
}
