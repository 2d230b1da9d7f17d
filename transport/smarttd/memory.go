package smarttd

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport"
)

// Per-item charges of the worst case that no config key states directly (docs/deploy.md,
// "Memory").
const (
	// sentPktBytes is a connection's per-PSN send record (psn_window of them).
	sentPktBytes = 48
	// authSessionBytes is one receiving authentication session (docs/security.md).
	authSessionBytes = 2 << 10
	// shardQueueLen is the hand-off queue of each shard (daemon.Options.ShardQueue).
	shardQueueLen = 4096
	// groBufBytes is the receive buffer of one batch slot with UDP GRO (64 KiB).
	groBufBytes = 64 << 10
	// ctlConnBytes is one open control connection: its goroutine's stack, its 4 KiB read
	// buffer and a request at the HTTP subset's limits (4 KiB line, 16 KiB of fields,
	// 16 KiB of body).
	ctlConnBytes = 64 << 10
	// runtimeBytes is the Go runtime, code, stacks and everything else not above.
	runtimeBytes = 64 << 20
)

// MemoryItem is one term of the daemon's worst-case memory.
type MemoryItem struct {
	Name  string `json:"name"`  // the config keys it follows from
	Bytes int64  `json:"bytes"` // its bound
	How   string `json:"how"`   // the formula, with this config's numbers
}

// MemoryBound is the daemon's worst-case memory for a config: the sum of its bounds.
type MemoryBound struct {
	Items []MemoryItem `json:"items"`
	Total int64        `json:"total"`
}

// String is one line: the total and its largest terms.
func (b MemoryBound) String() string {
	parts := make([]string, 0, len(b.Items))
	for _, it := range b.Items {
		if it.Bytes > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", it.Name, config.HumanSize(it.Bytes)))
		}
	}
	return fmt.Sprintf("%s (%s)", config.HumanSize(b.Total), strings.Join(parts, ", "))
}

// WorstCaseMemory is the sum of the memory bounds of a daemon running c, term by term:
// what the engine (its ledger's bound, per shard), the API and the kernel sockets (charged
// to the daemon's cgroup) can hold at most whatever peers and clients do. The engine's
// unproven share is within recv_budget; rings are the clients' memory (they allocate
// their pages).
func WorstCaseMemory(c *Config) MemoryBound {
	t, a, u := &c.Transport, &c.API, &c.UDP
	shards := int64(c.Shards.N())
	var b MemoryBound
	add := func(name string, n int64, how string, args ...any) {
		b.Items = append(b.Items, MemoryItem{Name: name, Bytes: n, How: fmt.Sprintf(how, args...)})
		b.Total += n
	}
	add("transport.recv_budget", shards*int64(t.HeldBound()),
		"shards %d x the engine's ledger bound (transport.Config.HeldBound: recv_budget %d, the unproven share within it, + one message's charge + max_conns %d x %d B per connection + (max_conns + max_time_wait %d) x %d B per TIME_WAIT entry + free lists)",
		shards, t.RecvBudget, t.MaxConns, t.ConnCharge(), t.MaxTimeWait, transport.TimeWaitCharge)
	add("transport.max_conns", int64(t.MaxConns)*int64(t.PSNWindow)*sentPktBytes,
		"send windows: max_conns %d x psn_window %d x %d B send records (allocated when a client sends on the connection)", t.MaxConns, t.PSNWindow, sentPktBytes)
	if t.Auth.Enabled() {
		add("transport.auth.max_sessions", int64(t.Auth.MaxSessions)*authSessionBytes, "max_sessions %d x %d B", t.Auth.MaxSessions, authSessionBytes)
	}
	add("api.max_outstanding_total", a.MaxOutstandingTotal, "bytes clients sent that are not yet delivered or failed")
	add("api.max_recv_queue_total", a.MaxRecvQueueTotal, "received bytes queued for clients or being written")
	add("api.socket_buffer", int64(a.MaxClients)*a.SocketBuffer*2,
		"max_clients %d x socket_buffer %d x 2 (the kernel counts twice what is set)", a.MaxClients, a.SocketBuffer)
	add("api.max_control_conns", int64(a.MaxControlConns)*ctlConnBytes,
		"max_control_conns %d x %d B (a goroutine, its read buffer, a request at the limits)", a.MaxControlConns, ctlConnBytes)
	socks := int64(1 + c.Transport.EVS)
	if u.Carrier != "port" {
		socks = 2
	}
	add("udp.socket_buffers", shards*2*(int64(u.RecvBuffer)+(socks-1)*int64(u.SendBuffer)),
		"shards %d x 2 x (recv_buffer %d + %d EV sockets x send_buffer %d); the kernel counts twice what is set", shards, u.RecvBuffer, socks-1, u.SendBuffer)
	dgram := int64(c.MaxDatagram())
	add("udp.batch_size", shards*int64(u.BatchSize)*(groBufBytes+dgram),
		"shards %d x batch_size %d x (%d B receive + %d B send buffers)", shards, u.BatchSize, groBufBytes, dgram)
	if shards > 1 {
		add("shards", shards*shardQueueLen*dgram, "shards %d x %d hand-off slots x %d B", shards, shardQueueLen, dgram)
	}
	add("runtime", runtimeBytes, "Go runtime, code and stacks")
	return b
}

// MemoryFit values: what the daemon does when its worst case exceeds memory_limit.
const (
	FitRefuse = "refuse" // refuse to start (the default)
	FitScale  = "scale"  // scale the byte budgets down to fit
)

// fitMemory checks c's worst case against limit (0: none) and, with memory_fit: scale,
// scales recv_budget, api.max_outstanding_total, api.max_recv_queue_total (each no lower
// than what max_message needs; api.max_outstanding no higher than its total) and
// api.socket_buffer (no lower than 256 KiB: max_clients sessions' kernel buffers) down
// until it fits. It returns the bound of the
// config as it will run and what was scaled.
func fitMemory(c *Config, limit int64) (MemoryBound, string, error) {
	b := WorstCaseMemory(c)
	if limit <= 0 || b.Total <= limit {
		return b, "", nil
	}
	if c.MemoryFit == FitScale {
		t, a := &c.Transport, &c.API
		old := fmt.Sprintf("recv_budget %s, api.max_outstanding_total %s, api.max_recv_queue_total %s, api.socket_buffer %s",
			config.HumanSize(t.RecvBudget), config.HumanSize(a.MaxOutstandingTotal), config.HumanSize(a.MaxRecvQueueTotal), config.HumanSize(a.SocketBuffer))
		orig := *c
		scale := func(f float64) {
			t.RecvBudget = max(int64(float64(orig.Transport.RecvBudget)*f), int64(t.MaxMessage))
			a.MaxOutstanding = min(orig.API.MaxOutstanding, max(int64(float64(orig.API.MaxOutstandingTotal)*f), a.MaxMessage))
			a.MaxOutstandingTotal = max(int64(float64(orig.API.MaxOutstandingTotal)*f), a.MaxOutstanding)
			a.MaxRecvQueueTotal = max(int64(float64(orig.API.MaxRecvQueueTotal)*f), a.MaxRecvQueue, a.MaxMessage)
			if sb := orig.API.SocketBuffer; sb > 0 {
				a.SocketBuffer = max(int64(float64(sb)*f), min(sb, 256<<10))
			}
		}
		// The largest factor that fits (the floors make the sum not linear in it).
		lo, hi := 0.0, 1.0
		for range 50 {
			mid := (lo + hi) / 2
			scale(mid)
			if WorstCaseMemory(c).Total <= limit {
				lo = mid
			} else {
				hi = mid
			}
		}
		scale(lo)
		if b = WorstCaseMemory(c); b.Total <= limit {
			return b, fmt.Sprintf("scaled by %.3f to fit memory_limit %s: %s -> recv_budget %s, api.max_outstanding_total %s, api.max_recv_queue_total %s, api.socket_buffer %s",
				lo, config.HumanSize(limit), old, config.HumanSize(t.RecvBudget), config.HumanSize(a.MaxOutstandingTotal), config.HumanSize(a.MaxRecvQueueTotal),
				config.HumanSize(a.SocketBuffer)), nil
		}
		*c = orig
		return b, "", fmt.Errorf("memory_fit = scale: worst-case memory %s exceeds memory_limit %s even with the budgets at their floors; lower api.max_message and transport.max_message, api.max_outstanding, api.max_clients, transport.max_conns or udp.send_buffer", config.HumanSize(b.Total), config.HumanSize(limit))
	}
	return b, "", fmt.Errorf("worst-case memory %s exceeds memory_limit %s: set memory_fit: scale (scales recv_budget, the api totals and api.socket_buffer down), lower the largest terms, or raise the limit; terms: %s",
		config.HumanSize(b.Total), config.HumanSize(limit), b)
}

// CgroupFS is where the cgroup v2 memory limit is read (paths injected in tests).
type CgroupFS struct {
	ProcSelfCgroup string // /proc/self/cgroup
	Root           string // /sys/fs/cgroup
}

// HostCgroup is the real cgroup file system.
var HostCgroup = CgroupFS{ProcSelfCgroup: "/proc/self/cgroup", Root: "/sys/fs/cgroup"}

// MemoryLimit is the cgroup v2 memory limit of this process: the smallest memory.max of
// its cgroup and the cgroup's ancestors, 0 when none is set (or no cgroup v2), and where
// it was found.
func (fs CgroupFS) MemoryLimit() (int64, string, error) {
	f, err := os.ReadFile(fs.ProcSelfCgroup)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, "", nil
		}
		return 0, "", err
	}
	var rel string
	sc := bufio.NewScanner(bytes.NewReader(f))
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok { // the unified (v2) hierarchy
			rel = p
		}
	}
	if rel == "" {
		return 0, "", nil
	}
	var limit int64
	var where string
	for dir := filepath.Join(fs.Root, filepath.Clean("/"+rel)); ; dir = filepath.Dir(dir) {
		b, err := os.ReadFile(filepath.Join(dir, "memory.max"))
		if err == nil {
			v := strings.TrimSpace(string(b))
			if v != "max" {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, "", fmt.Errorf("%s: %q is not a byte count", filepath.Join(dir, "memory.max"), v)
				}
				if limit == 0 || n < limit {
					limit, where = n, filepath.Join(dir, "memory.max")
				}
			}
		}
		if dir == fs.Root || len(dir) <= len(fs.Root) {
			break
		}
	}
	return limit, where, nil
}

// MemoryLimitSetting is the memory_limit key: "auto" (the cgroup v2 limit, if any), "none",
// or a size.
type MemoryLimitSetting int64

// MemoryLimitAuto and MemoryLimitNone are the memory_limit settings without a size.
const (
	MemoryLimitAuto MemoryLimitSetting = -1
	MemoryLimitNone MemoryLimitSetting = 0
)

// UnmarshalYAML reads auto, none or a size.
func (m *MemoryLimitSetting) UnmarshalYAML(n *yaml.Node) error {
	switch n.Value {
	case "auto":
		*m = MemoryLimitAuto
		return nil
	case "none", "0":
		*m = MemoryLimitNone
		return nil
	}
	v, err := config.ParseSize(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		return fmt.Errorf("must be auto (the cgroup's memory.max), none, or a size such as 4GiB")
	}
	*m = MemoryLimitSetting(v)
	return nil
}

// MarshalYAML writes auto, none or the size.
func (m MemoryLimitSetting) MarshalYAML() (any, error) {
	switch m {
	case MemoryLimitAuto:
		return "auto", nil
	case MemoryLimitNone:
		return "none", nil
	}
	return config.FormatSize(int64(m)), nil
}

// MarshalJSON writes the same as MarshalYAML, quoted.
func (m MemoryLimitSetting) MarshalJSON() ([]byte, error) {
	v, _ := m.MarshalYAML()
	return []byte(strconv.Quote(v.(string))), nil
}

// resolveMemoryLimit is the limit the worst case must fit under c.MemoryLimit, and where
// it comes from.
func resolveMemoryLimit(c *Config, fs CgroupFS) (int64, string, error) {
	switch c.MemoryLimit {
	case MemoryLimitNone:
		return 0, "", nil
	case MemoryLimitAuto:
		n, where, err := fs.MemoryLimit()
		if err != nil {
			return 0, "", fmt.Errorf("memory_limit: auto: %w", err)
		}
		return n, "cgroup " + where, nil
	}
	return int64(c.MemoryLimit), "memory_limit", nil
}

// CheckMemory is what Start does with memory_limit and memory_fit, without starting:
// the worst case of c as it would run (scaled with memory_fit: scale), or why it would
// refuse to start.
func CheckMemory(c *Config, fs CgroupFS) (MemoryBound, error) {
	limit, where, err := resolveMemoryLimit(c, fs)
	if err != nil {
		return MemoryBound{}, err
	}
	b, _, err := fitMemory(c, limit)
	if err != nil {
		return b, fmt.Errorf("%s: %w", where, err)
	}
	return b, nil
}
