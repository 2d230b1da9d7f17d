package smarttd_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/transport/client"
	"github.com/smartt-transport/smartt/transport/daemon"
	"github.com/smartt-transport/smartt/transport/smarttd"
)

// The worst case of a config is the sum of its terms, each following its keys.
func TestWorstCaseMemory(t *testing.T) {
	c := smarttd.DefaultConfig()
	b := smarttd.WorstCaseMemory(&c)
	terms := map[string]int64{}
	var sum int64
	for _, it := range b.Items {
		terms[it.Name] = it.Bytes
		sum += it.Bytes
	}
	if sum != b.Total {
		t.Fatalf("total %d, terms sum to %d", b.Total, sum)
	}
	want := map[string]int64{
		"transport.recv_budget":     int64(c.Transport.HeldBound()),
		"transport.max_conns":       4096 * 4096 * 48,
		"api.max_outstanding_total": 4 << 30,
		"api.max_recv_queue_total":  2 << 30,
		"api.socket_buffer":         512 * 4 << 20 * 2,
		"api.max_control_conns":     256 * 64 << 10,
		"udp.socket_buffers":        2 * (8<<20 + 256*4<<20),
		"runtime":                   64 << 20,
	}
	for k, v := range want {
		if terms[k] != v {
			t.Errorf("%s = %d, want %d", k, terms[k], v)
		}
	}
	// The defaults need more than the 4 GiB the DaemonSet once had as its limit.
	if b.Total <= 4<<30 {
		t.Errorf("default worst case %d <= 4 GiB", b.Total)
	}
	if h := c.Transport.HeldBound(); h < 3<<30 {
		t.Errorf("engine bound %d below recv_budget + max_message", h)
	}
	// Each term moves with its keys.
	c.API.MaxClients *= 2
	c.Shards = 2
	c.Transport.Auth.Mode = 1
	b2 := smarttd.WorstCaseMemory(&c)
	if got := b2.Total - b.Total; got <= 64*4<<20*2 {
		t.Errorf("doubling max_clients, 2 shards and auth added %d bytes", got)
	}
	if !strings.Contains(b.String(), "api.max_outstanding_total 4 GiB") {
		t.Errorf("String: %s", b)
	}
}

// fakeCgroup writes a cgroup v2 tree: /proc/self/cgroup naming rel, and memory.max files.
func fakeCgroup(t *testing.T, rel string, max map[string]string) smarttd.CgroupFS {
	dir := t.TempDir()
	fs := smarttd.CgroupFS{ProcSelfCgroup: filepath.Join(dir, "cgroup"), Root: filepath.Join(dir, "sys")}
	os.WriteFile(fs.ProcSelfCgroup, []byte("12:memory:/v1-ignored\n0::"+rel+"\n"), 0o644)
	for p, v := range max {
		d := filepath.Join(fs.Root, p)
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "memory.max"), []byte(v+"\n"), 0o644)
	}
	return fs
}

// The limit is the smallest memory.max on the path from the process's cgroup to the root.
func TestCgroupMemoryLimit(t *testing.T) {
	fs := fakeCgroup(t, "/kubepods/pod1/ctr", map[string]string{
		"kubepods": "8589934592", "kubepods/pod1": "max", "kubepods/pod1/ctr": "4294967296"})
	if n, where, err := fs.MemoryLimit(); err != nil || n != 4<<30 || !strings.HasSuffix(where, "kubepods/pod1/ctr/memory.max") {
		t.Errorf("limit %d at %s, %v; want 4 GiB at the container", n, where, err)
	}
	fs = fakeCgroup(t, "/a/b", map[string]string{"a": "1073741824", "a/b": "max"})
	if n, _, err := fs.MemoryLimit(); err != nil || n != 1<<30 {
		t.Errorf("limit %d, %v; want the parent's 1 GiB", n, err)
	}
	fs = fakeCgroup(t, "/", map[string]string{})
	if n, _, err := fs.MemoryLimit(); err != nil || n != 0 {
		t.Errorf("no memory.max: limit %d, %v; want none", n, err)
	}
	fs = fakeCgroup(t, "/x", map[string]string{"x": "lots"})
	if _, _, err := fs.MemoryLimit(); err == nil {
		t.Error("a memory.max that is not a number was accepted")
	}
	fs.ProcSelfCgroup = filepath.Join(t.TempDir(), "absent")
	if n, _, err := fs.MemoryLimit(); err != nil || n != 0 {
		t.Errorf("no /proc/self/cgroup: %d, %v", n, err)
	}
}

func startMem(t *testing.T, cfg smarttd.Config, fs smarttd.CgroupFS, log *bytes.Buffer) (*smarttd.Daemon, error) {
	cfg.Listen = netip.MustParseAddrPort("10.0.0.1:23600")
	cfg.API.Socket = filepath.Join(tempDir(t), "d.sock")
	d, err := smarttd.Start(cfg, smarttd.Options{OpenSocket: smarttd.MemSockets(daemon.NewMemNet()), Seed: 1, Cgroup: &fs,
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err == nil {
		t.Cleanup(func() { d.Shutdown(context.Background()) })
	}
	return d, err
}

// Under a cgroup limit below its worst case the daemon refuses to start, naming the terms
// and the way out; with memory_fit: scale it scales its budgets down to fit and says so;
// the bound is in the start log and in /v1/status.
func TestStartFitsCgroupLimit(t *testing.T) {
	var log bytes.Buffer
	fs := fakeCgroup(t, "/svc", map[string]string{"svc": "6442450944"}) // 6 GiB
	_, err := startMem(t, smarttd.DefaultConfig(), fs, &log)
	if err == nil || !strings.Contains(err.Error(), "exceeds memory_limit 6 GiB") || !strings.Contains(err.Error(), "memory_fit: scale") ||
		!strings.Contains(err.Error(), "svc/memory.max") {
		t.Fatalf("default config under 6 GiB: %v", err)
	}
	cfg := smarttd.DefaultConfig()
	cfg.MemoryFit = smarttd.FitScale
	fs = fakeCgroup(t, "/svc", map[string]string{"svc": "8589934592"}) // 8 GiB
	d, err := startMem(t, cfg, fs, &log)
	if err != nil {
		t.Fatal(err)
	}
	if d.Memory.Total > 8<<30 || d.MemoryLimit != 8<<30 || d.Config.Transport.RecvBudget >= 2<<30 {
		t.Fatalf("scaled: bound %d, limit %d, recv_budget %d", d.Memory.Total, d.MemoryLimit, d.Config.Transport.RecvBudget)
	}
	for _, w := range []string{"memory_fit: scale: budgets scaled", "worst-case memory", "memory_bound="} {
		if !strings.Contains(log.String(), w) {
			t.Errorf("log lacks %q:\n%s", w, log.String())
		}
	}
	st, err := client.New(d.Config.API.Socket).Status(context.Background())
	if err != nil || st.MemoryBound != d.Memory.Total || st.MemoryLimit != 8<<30 {
		t.Fatalf("status %+v, %v; want memory_bound %d", st, err, d.Memory.Total)
	}
	// Floors: a limit below what max_message needs is refused even with scale.
	fs = fakeCgroup(t, "/svc", map[string]string{"svc": "1073741824"})
	if _, err := startMem(t, cfg, fs, &log); err == nil || !strings.Contains(err.Error(), "even with the budgets at their floors") {
		t.Fatalf("scale under 1 GiB: %v", err)
	}
	// memory_limit: none ignores the cgroup.
	cfg.MemoryLimit = smarttd.MemoryLimitNone
	if _, err := startMem(t, cfg, fs, &log); err != nil {
		t.Fatalf("memory_limit: none: %v", err)
	}
}

// memory_limit reads auto, none and sizes.
func TestMemoryLimitKey(t *testing.T) {
	for doc, want := range map[string]smarttd.MemoryLimitSetting{"": smarttd.MemoryLimitAuto, "memory_limit: none": smarttd.MemoryLimitNone,
		"memory_limit: 16GiB": 16 << 30, "memory_limit: auto": smarttd.MemoryLimitAuto} {
		c, err := smarttd.Load([]byte(doc))
		if err != nil || c.MemoryLimit != want {
			t.Errorf("%q: %v, %v", doc, c.MemoryLimit, err)
		}
	}
	for doc, want := range map[string]string{"memory_limit: lots": `memory_limit: "lots": must be auto`, "memory_fit: shrink": `memory_fit = "shrink": must be refuse or scale`} {
		if _, err := smarttd.Load([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", doc, err, want)
		}
	}
}

// Errors of the socket layer name the YAML keys, not its Go fields (Config.Listen,
// Config.Carrier).
func TestSocketErrorsNameYAMLKeys(t *testing.T) {
	cfg := smarttd.DefaultConfig()
	cfg.Listen = netip.MustParseAddrPort("0.0.0.0:23690")
	cfg.UDP.Carrier = "raw"
	cfg.API.Socket = filepath.Join(tempDir(t), "d.sock")
	d, err := smarttd.Start(cfg, smarttd.Options{Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		d.Shutdown(context.Background())
		t.Fatal("raw carrier on 0.0.0.0 started")
	}
	if strings.Contains(err.Error(), "Config.") || !strings.Contains(err.Error(), "udp.carrier") || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("error names Go fields or not the keys: %v", err)
	}
}
