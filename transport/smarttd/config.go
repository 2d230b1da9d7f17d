// Package smarttd assembles the daemon: YAML configuration, the UDP socket layer, the
// engine's node, the Unix-socket API and the metrics endpoint, with graceful shutdown.
// cmd/smarttd runs one; `smartt demo` runs two in one process.
package smarttd

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/hwprofile"
	"github.com/smartt-transport/smartt/reps"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/api"
	"github.com/smartt-transport/smartt/transport/seal"
	"github.com/smartt-transport/smartt/transport/udp"
	"github.com/smartt-transport/smartt/transport/wire"
)

// DefaultYAML is the embedded default configuration (every field, commented).
//
//go:embed default.yaml
var DefaultYAML []byte

// DefaultPort is the default UDP listen port. 23600 and the default EV source ports after
// it (23601..23856) lie in the IANA registry's unassigned block 23547-23999 of the
// registered range, below Linux's ephemeral ports (32768-60999) and Kubernetes NodePorts
// (30000-32767), and clear of RoCEv2 (4791), UET (4793), VXLAN (4789) and Geneve (6081),
// which a datacenter host may well run. docs/deploy.md lists what to open in firewalls.
const DefaultPort = 23600

// AuthTrailerLen is reserved at the end of every data packet for the authentication
// trailer (seal.Overhead, when transport.auth is on). It is reserved whether or not
// authentication is on, so turning it on never pushes packets over the path MTU.
// Keep it equal to seal.Overhead.
const AuthTrailerLen = seal.Overhead

// PacketOverhead is what a data packet adds to transport.mtu bytes of payload inside its
// UDP datagram: the smartt DATA header and the authentication trailer.
const PacketOverhead = wire.DataHdrLen + AuthTrailerLen

// maxUDPPayload is the largest UDP payload of an IPv4 datagram (65,535 - 20 - 8).
const maxUDPPayload = 65507

// MaxDatagram is the largest UDP datagram the daemon sends: transport.mtu bytes of payload
// plus PacketOverhead, or plus the DATA header and the INT block with transport.int (which
// excludes authentication; the block is longer than the trailer). The path MTU must hold
// it plus the IP (20 or 40) and UDP (8) headers.
func (c *Config) MaxDatagram() int {
	if c.Transport.INT {
		return max(c.Transport.MTU+PacketOverhead, transport.MaxDatagram(c.Transport))
	}
	return c.Transport.MTU + PacketOverhead
}

// UDPConfig configures the socket layer (transport/udp).
type UDPConfig struct {
	// EVPortBase is the first UDP source port of the EV pool (0: listen port + 1).
	EVPortBase uint16 `yaml:"ev_port_base" json:"ev_port_base"`
	// Carrier carries the EV: "port" (source-port pool), "raw" (IP_HDRINCL) or "flowlabel" (IPv6).
	Carrier string `yaml:"carrier" json:"carrier"`
	// Datapath is "sockets" (UDP sockets) or "afxdp": an AF_XDP socket and XDP program on
	// the listen address's interface (IPv4), probed at start with a logged fallback to
	// sockets (docs/datapath.md, "AF_XDP"); or "auto": afxdp where it pays and fits
	// (Config.ResolveDatapath), else sockets.
	Datapath string `yaml:"datapath" json:"datapath"`
	// DataDSCP and ControlDSCP are the DSCP code points of data and control packets (0..63).
	DataDSCP    uint8 `yaml:"data_dscp" json:"data_dscp"`
	ControlDSCP uint8 `yaml:"control_dscp" json:"control_dscp"`
	// Off switches (the socket layer also falls back by itself when the kernel refuses).
	DisableECN        bool `yaml:"disable_ecn" json:"disable_ecn"`
	DisableTimestamps bool `yaml:"disable_timestamps" json:"disable_timestamps"`
	DisableBatch      bool `yaml:"disable_batch" json:"disable_batch"`
	DisableGSO        bool `yaml:"disable_gso" json:"disable_gso"`
	DisableGRO        bool `yaml:"disable_gro" json:"disable_gro"`
	// DisableDF lets the kernel fragment datagrams larger than the path MTU instead of
	// refusing them (Don't Fragment off). Not recommended: a lost fragment loses the packet.
	DisableDF bool `yaml:"disable_df" json:"disable_df"`
	// TxTimestampEvery samples a kernel TX timestamp on 1 in N packets (0: off).
	TxTimestampEvery int `yaml:"tx_timestamp_every" json:"tx_timestamp_every"`
	// RecvBuffer and SendBuffer are socket buffer sizes, bytes (0: kernel default).
	RecvBuffer int `yaml:"recv_buffer" json:"recv_buffer" unit:"bytes"`
	SendBuffer int `yaml:"send_buffer" json:"send_buffer" unit:"bytes"`
	// BatchSize is the recvmmsg/sendmmsg batch (1..1024).
	BatchSize int `yaml:"batch_size" json:"batch_size"`

	// ShardSteering is how the kernel spreads received datagrams over the engine shards'
	// listen sockets (shards > 1): "cbpf" (a classic BPF program picks the shard the
	// connection ID names) or "hash" (the kernel's SO_REUSEPORT 4-tuple hash; shards hand
	// what is not theirs to its owner).
	ShardSteering string `yaml:"shard_steering" json:"shard_steering"`

	// GatherBatch reorders each send batch so that packets to one destination on one EV
	// (and of one kind, data or control) are adjacent, in their order, groups in the order
	// of their first packet: UDP GSO then joins them across connections.
	GatherBatch bool `yaml:"gather_batch" json:"gather_batch"`

	// CopyPayload copies each data packet's payload into its buffer behind the header, as
	// formerly; by default (false) header and payload leave as two iovecs, the
	// payload straight from the message's buffer (not on the raw carrier or AF_XDP, nor
	// with transport.auth on, which copy as before).
	CopyPayload bool `yaml:"copy_payload" json:"copy_payload"`

	// GROInPlace lets the engine read each received datagram in the socket's GRO buffer
	// instead of a copy in the daemon's packet buffer (udp.Config.GROInPlace). Off by
	// default: it did not measurably pay on the veth pair (docs/datapath.md, "UDP GRO").
	GROInPlace bool `yaml:"gro_in_place" json:"gro_in_place"`

	// BusyPoll keeps the engine's socket read polling this long after the socket runs dry
	// before it sleeps (udp.Config.BusyPoll): a datagram arriving meanwhile costs no
	// wake-up, at the price of a core kept busy (only while polling pays: at most one
	// wake-up's cost per datagram plus one busy_poll). 0 (off, the default) to 1ms; for hosts
	// with cores to spare: on the 2-core test host it doubled the round trip
	// (docs/datapath.md, "The round trip").
	BusyPoll config.Duration `yaml:"busy_poll" json:"busy_poll"`
}

// Config is smarttd's configuration file.
type Config struct {
	// Listen is the UDP address:port peers send to.
	Listen netip.AddrPort `yaml:"listen" json:"listen"`
	// Metrics is the host:port of the Prometheus /metrics endpoint ("" : off).
	Metrics string `yaml:"metrics" json:"metrics"`
	// MetricsPerConnection adds per-connection series (labels conn and peer) to /metrics.
	// Off by default: their number grows with the number of peers.
	MetricsPerConnection bool `yaml:"metrics_per_connection" json:"metrics_per_connection"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `yaml:"log_level" json:"log_level"`
	// LogFormat is text (logfmt key=value lines) or json (one JSON object per line).
	LogFormat string `yaml:"log_format" json:"log_format"`
	// DecisionTiming measures every congestion-control decision's wall time (metric
	// smartt_cc_decision_seconds; two monotonic clock reads per ACK).
	DecisionTiming bool `yaml:"decision_timing" json:"decision_timing"`
	// ShutdownTimeout bounds graceful shutdown: messages still outstanding then fail
	// (0: at once; 1ms..10m).
	ShutdownTimeout config.Duration `yaml:"shutdown_timeout" json:"shutdown_timeout"`
	// Shards is the number of engine shards: 1..256, or "auto" (0 here) for GOMAXPROCS.
	// Each shard is an engine with its own sockets and goroutines; connections are
	// partitioned among them (docs/datapath.md, "Engine shards").
	Shards Shards `yaml:"shards" json:"shards"`
	// Procs is the daemon's GOMAXPROCS: 0 (Go's default, one per CPU it may use) or
	// 1..MaxProcs. cmd/smarttd sets it before the daemon starts. 1 suits a latency-bound
	// daemon of one shard on a host with few cores: with a second processor idle, the Go
	// runtime wakes a thread for it at almost every message (a futex wake-up and a
	// context switch each), which one processor never does; bulk transfers lose the
	// overlap of a session's reads with the engine (docs/datapath.md, "Processors").
	Procs int `yaml:"procs" json:"procs"`
	// MemoryLimit is what the daemon's worst-case memory (WorstCaseMemory) must fit: auto
	// (the cgroup v2 memory.max of the daemon, if any), none, or a size.
	MemoryLimit MemoryLimitSetting `yaml:"memory_limit" json:"memory_limit"`
	// MemoryFit is what happens when the worst case exceeds MemoryLimit: refuse (to start)
	// or scale (recv_budget and the API totals down to fit). docs/deploy.md, "Memory".
	MemoryFit string `yaml:"memory_fit" json:"memory_fit"`
	// UDP configures the socket layer.
	UDP UDPConfig `yaml:"udp" json:"udp"`
	// API configures the Unix-socket API.
	API api.Config `yaml:"api" json:"api"`
	// Transport is the protocol engine's configuration (listen_port is taken from Listen).
	Transport transport.Config `yaml:"transport" json:"transport"`
}

// DefaultConfig returns the built-in defaults: default.yaml over the engine's defaults.
func DefaultConfig() Config {
	var c Config
	c.API = api.DefaultConfig()
	c.Transport = transport.DefaultConfig()
	if err := config.DecodeYAML(DefaultYAML, &c); err != nil {
		panic("smarttd: embedded default.yaml: " + err.Error())
	}
	return c
}

// Load decodes YAML over the defaults (strictly: unknown fields are errors), reads the
// key files of transport.auth and validates.
func Load(data []byte) (Config, error) {
	c := DefaultConfig()
	rest, decErr := decodeRest(data, &c)
	if !rest {
		return c, decErr
	}
	// Validate what decoded too (refused keys keep their defaults): every error at once.
	return c, errors.Join(decErr, LoadKeyFiles(&c.Transport.Auth), c.Validate())
}

// LoadKeyFiles reads the key files named in a (auth.key_file, auth.peers[i].key_file)
// into the keys, and clears the file names: the engine does no I/O. A key file holds 64
// hex digits (surrounding white space ignored) and must not be accessible to group or
// others (mode 0600 or stricter).
func LoadKeyFiles(a *seal.Config) error {
	var errs []error
	read := func(field, path string, k *seal.Key) bool {
		if path == "" {
			return false
		}
		if !k.IsZero() {
			errs = append(errs, fmt.Errorf("transport.%s and transport.%s_file: give one of them, not both", field, field))
			return false
		}
		st, err := os.Stat(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("transport.%s_file = %q: %w", field, path, err))
			return false
		}
		if perm := st.Mode().Perm(); perm&0o077 != 0 {
			errs = append(errs, fmt.Errorf("transport.%s_file = %q: mode %#o: must not be accessible to group or others (chmod 600)", field, path, perm))
			return false
		}
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("transport.%s_file = %q: %w", field, path, err))
			return false
		}
		var key seal.Key
		if err := key.UnmarshalText(bytes.TrimSpace(b)); err != nil {
			errs = append(errs, fmt.Errorf("transport.%s_file = %q: %w", field, path, err))
			return false
		}
		if key.IsZero() {
			errs = append(errs, fmt.Errorf("transport.%s_file = %q: empty or all-zero key", field, path))
			return false
		}
		*k = key
		return true
	}
	if read("auth.key", a.KeyFile, &a.Key) {
		a.KeyFile = ""
	}
	for i := range a.Peers {
		if read(fmt.Sprintf("auth.peers[%d].key", i), a.Peers[i].KeyFile, &a.Peers[i].Key) {
			a.Peers[i].KeyFile = ""
		}
	}
	return errors.Join(errs...)
}

// Validate checks every field, naming it with its allowed range.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if !c.Listen.IsValid() || c.Listen.Port() == 0 {
		bad("listen = %q: must be address:port with a port in 1..65535", c.Listen)
	}
	if c.Metrics != "" {
		if _, _, err := net.SplitHostPort(c.Metrics); err != nil {
			bad("metrics = %q: must be host:port or empty (off)", c.Metrics)
		}
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if c.MemoryFit != FitRefuse && c.MemoryFit != FitScale {
		bad("memory_fit = %q: must be refuse or scale", c.MemoryFit)
	}
	if c.MemoryLimit < MemoryLimitAuto {
		bad("memory_limit = %d: must be auto, none or a size", int64(c.MemoryLimit))
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("log_format = %q: must be text or json", c.LogFormat)
	}
	if c.ShutdownTimeout != 0 && (c.ShutdownTimeout < 1_000_000 || c.ShutdownTimeout > 600_000_000_000) {
		bad("shutdown_timeout = %v: must be 0 (fail outstanding messages at once) or in 1ms..10m", c.ShutdownTimeout)
	}
	if c.Procs < 0 || c.Procs > MaxProcs {
		bad("procs = %d: must be 0 (Go's default: one per CPU) or in 1..%d", c.Procs, MaxProcs)
	}
	u := &c.UDP
	if c.Shards < 0 || c.Shards > MaxShards {
		bad("shards = %d: must be in 1..%d or auto", int(c.Shards), MaxShards)
	}
	switch u.ShardSteering {
	case "cbpf", "hash":
	default:
		bad("udp.shard_steering = %q: must be cbpf or hash", u.ShardSteering)
	}
	if c.Shards.N() > 1 && u.Datapath == "afxdp" {
		bad("shards = %v with udp.datapath = afxdp: the AF_XDP datapath takes one shard (set shards: 1 or datapath: sockets)", c.Shards)
	}
	switch u.Carrier {
	case "port", "raw", "flowlabel":
	default:
		bad("udp.carrier = %q: must be port, raw or flowlabel", u.Carrier)
	}
	switch u.Datapath {
	case "", "sockets", "afxdp", "auto":
	default:
		bad("udp.datapath = %q: must be sockets, afxdp or auto", u.Datapath)
	}
	if u.Carrier == "flowlabel" && c.Transport.EVS > 4096 {
		bad("udp.carrier = flowlabel: transport.evs = %d, the flow-label carrier allows 1..4096", c.Transport.EVS)
	}
	if u.Carrier == "flowlabel" && !c.Listen.Addr().Is6() {
		bad("udp.carrier = flowlabel: needs an IPv6 listen address, have %v", c.Listen.Addr())
	}
	if u.DataDSCP > 63 {
		bad("udp.data_dscp = %d: must be in 0..63", u.DataDSCP)
	}
	if u.ControlDSCP > 63 {
		bad("udp.control_dscp = %d: must be in 0..63", u.ControlDSCP)
	}
	if u.Carrier == "port" {
		base := int(u.EVPortBase)
		if base == 0 {
			base = int(c.Listen.Port()) + 1
		}
		if base+c.Transport.EVS-1 > 65535 {
			bad("udp.ev_port_base = %d with transport.evs = %d: the EV port range must end at or below 65535", base, c.Transport.EVS)
		}
		if lp := int(c.Listen.Port()); lp >= base && lp < base+c.Transport.EVS {
			bad("udp.ev_port_base = %d: the EV port range %d..%d must not contain the listen port %d", base, base, base+c.Transport.EVS-1, lp)
		}
	}
	if oh := c.MaxDatagram() - c.Transport.MTU; c.MaxDatagram() > maxUDPPayload {
		what := "smartt header and authentication trailer"
		if c.Transport.INT {
			what = "smartt header and INT block"
		}
		bad("transport.mtu = %d: with the %d-byte %s a packet is %d bytes, over the %d-byte UDP limit: must be at most %d",
			c.Transport.MTU, oh, what, c.MaxDatagram(), maxUDPPayload, maxUDPPayload-oh)
	}
	if u.TxTimestampEvery < 0 {
		bad("udp.tx_timestamp_every = %d: must be >= 0 (0: off)", u.TxTimestampEvery)
	}
	if u.RecvBuffer < 0 || u.RecvBuffer > 1<<30 {
		bad("udp.recv_buffer = %d: must be in 0..%d bytes", u.RecvBuffer, 1<<30)
	}
	if u.SendBuffer < 0 || u.SendBuffer > 1<<30 {
		bad("udp.send_buffer = %d: must be in 0..%d bytes", u.SendBuffer, 1<<30)
	}
	if u.BatchSize < 1 || u.BatchSize > 1024 {
		bad("udp.batch_size = %d: must be in 1..1024", u.BatchSize)
	}
	if u.BusyPoll < 0 || u.BusyPoll > config.Duration(udp.MaxBusyPoll) {
		bad("udp.busy_poll = %v: must be 0 (off) or in 1ns..%v", u.BusyPoll, udp.MaxBusyPoll)
	}
	if err := c.API.Validate(); err != nil {
		errs = append(errs, err)
	}
	if !slices.Contains(transport.CCNames(), c.Transport.CC) {
		bad("transport.cc = %q: must be one of %s", c.Transport.CC, strings.Join(transport.CCNames(), ", "))
	}
	if !slices.Contains(transport.LBNames(), c.Transport.LB) {
		bad("transport.lb = %q: must be one of %s", c.Transport.LB, strings.Join(transport.LBNames(), ", "))
	}
	t := c.Transport
	t.ListenPort = c.Listen.Port()
	if err := t.Validate(); err != nil {
		// The checks above name cc and the datagram's mtu limit: one error each.
		var drop []string
		if !slices.Contains(transport.CCNames(), c.Transport.CC) {
			drop = append(drop, "cc = ")
		}
		if c.MaxDatagram() > maxUDPPayload {
			drop = append(drop, "mtu = ")
		}
		errs = append(errs, prefixLines("transport.", err, drop...))
	} else {
		// The engine's config is valid, so its controllers build: check them against the
		// profile even when other keys are wrong, to report every error at once.
		if err := c.checkProfile(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkProfile checks the controller and balancer against transport.profile as the engine
// does when it starts, but before any socket opens, and names the controllers that fit.
func (c *Config) checkProfile() error {
	t := c.Transport
	if t.Profile == "" {
		return nil
	}
	p, err := hwprofile.Lookup(t.Profile)
	if err != nil {
		return fmt.Errorf("transport.%w", err)
	}
	fits := func(ccName string) error {
		ctl, err := transport.NewCC(ccName, t)
		if err != nil {
			return err
		}
		bal, err := transport.NewLB(t.LB, t, rand.New(rand.NewPCG(0, 0)))
		if err != nil {
			return err
		}
		return p.CheckPair(ccName, ctl, t.LB, bal)
	}
	err = fits(t.CC)
	if err == nil {
		return nil
	}
	var ok []string
	names := transport.CCNames()
	// Variants of the configured controller first ("smartt" -> "smartt-fixed").
	slices.SortStableFunc(names, func(a, b string) int {
		return cmpBool(!strings.HasPrefix(a, t.CC), !strings.HasPrefix(b, t.CC))
	})
	for _, name := range names {
		if name != t.CC && fits(name) == nil {
			ok = append(ok, "cc: "+name)
		}
	}
	hint := "no compiled-in controller fits it with lb " + t.LB
	if len(ok) > 0 {
		hint = "with lb " + t.LB + " these fit: " + strings.Join(ok, ", ")
	}
	return fmt.Errorf("transport.profile = %q with transport.cc = %q: %v; %s", t.Profile, t.CC, err, hint)
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// prefixLines prefixes every line of err's text, leaving out lines that begin with one of
// drop when another check already reported that key.
func prefixLines(p string, err error, drop ...string) error {
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if !slices.ContainsFunc(drop, func(d string) bool { return strings.HasPrefix(l, d) }) {
			lines = append(lines, p+l)
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return errors.New(strings.Join(lines, "\n"))
}

// ParseLevel reads a log level name.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log_level = %q: must be debug, info, warn or error", s)
	}
	return l, nil
}

// NewLogger returns the logger c asks for (log_level, log_format), writing to w.
func (c *Config) NewLogger(w io.Writer) *slog.Logger {
	level, _ := ParseLevel(c.LogLevel)
	o := &slog.HandlerOptions{Level: level}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// View returns the configuration as generic maps under its YAML keys (for JSON output:
// the engine config holds function fields JSON cannot encode). Keys show as "<redacted>".
func (c *Config) View() any {
	b, err := yaml.Marshal(c)
	if err != nil {
		return map[string]string{"error": err.Error()}
	}
	var v map[string]any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return map[string]string{"error": err.Error()}
	}
	return v
}

// MaxShards bounds the shards key: the steering program names a shard by one byte of the
// connection ID.
const MaxShards = 256

// MaxProcs bounds the procs key.
const MaxProcs = 1024

// Shards is the shards key: a count, or 0 for "auto" (GOMAXPROCS, at most MaxShards).
type Shards int

// N is the number of shards to run.
func (s Shards) N() int {
	if s == 0 {
		return min(runtime.GOMAXPROCS(0), MaxShards)
	}
	return int(s)
}

// String is "auto" or the count.
func (s Shards) String() string {
	if s == 0 {
		return "auto"
	}
	return strconv.Itoa(int(s))
}

// UnmarshalYAML reads a count or "auto".
func (s *Shards) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Value == "auto" {
		*s = 0
		return nil
	}
	v, err := strconv.Atoi(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil || v < 1 || v > MaxShards {
		return fmt.Errorf("must be in 1..%d or auto", MaxShards)
	}
	*s = Shards(v)
	return nil
}

// MarshalYAML writes a count or "auto".
func (s Shards) MarshalYAML() (any, error) {
	if s == 0 {
		return "auto", nil
	}
	return int(s), nil
}

// MarshalJSON writes a count or "auto".
func (s Shards) MarshalJSON() ([]byte, error) {
	if s == 0 {
		return []byte(`"auto"`), nil
	}
	return []byte(strconv.Itoa(int(s))), nil
}

// ResolveDatapath is the socket layer's datapath for c.UDP.Datapath, and why: auto is
// udp's auto (AF_XDP if the listen address and its interface fit and the probe succeeds,
// else sockets) when the engine sprays a new EV per packet (lb reps or ops with
// reps.run 1 or auto, which is 1 on AF_XDP: ResolveRun) on one shard, where AF_XDP measured about twice the sockets' goodput at
// 0.6x their CPU per GB; sockets otherwise (EVs that stay send as UDP GSO runs, which
// the sockets do at less CPU than AF_XDP; AF_XDP serves one shard). docs/datapath.md,
// "AF_XDP".
func (c *Config) ResolveDatapath() (dp, why string) {
	switch c.UDP.Datapath {
	case "", udp.DatapathSockets:
		return udp.DatapathSockets, "configured"
	case udp.DatapathAFXDP:
		return udp.DatapathAFXDP, "configured"
	}
	t := &c.Transport
	switch {
	case c.Shards.N() > 1:
		return udp.DatapathSockets, fmt.Sprintf("auto: %d shards (AF_XDP serves one)", c.Shards.N())
	case t.LB != "reps" && t.LB != "ops":
		return udp.DatapathSockets, fmt.Sprintf("auto: lb %s keeps EVs (GSO runs on sockets cost less)", t.LB)
	case t.REPS.Run > 1:
		return udp.DatapathSockets, fmt.Sprintf("auto: reps.run %d (GSO runs on sockets cost less)", t.REPS.Run)
	}
	return udp.DatapathAuto, fmt.Sprintf("auto: lb %s sprays a new EV per packet (reps.run %v)", t.LB, t.REPS.Run)
}

// ResolveRun is the EV run length (reps.run) the engine gets on a socket layer whose
// datapath is dp ("sockets", "afxdp"; "" for one that is not UDP's) and whose sends may
// use UDP GSO, and why. A configured length is kept. auto is 1 where a per-packet EV
// costs no extra send: AF_XDP (a descriptor per frame anyway), the raw carrier (one
// socket, no GSO), other socket layers. On the sockets datapath it is the run that fills
// one GSO message (udp.GSORun), sent as one sendmsg on its EV's socket: per-packet EVs
// there cost a sendmsg and a trip through the UDP stack per datagram (docs/datapath.md,
// "EV runs").
func (c *Config) ResolveRun(dp string, gso bool) (run int, why string) {
	if r := c.Transport.REPS.Run; r != reps.RunAuto {
		return int(r), "configured"
	}
	switch {
	case dp == udp.DatapathAFXDP:
		return 1, "auto: afxdp sends a descriptor per frame whatever its EV"
	case dp != udp.DatapathSockets:
		return 1, "auto: not a UDP socket layer"
	case c.UDP.Carrier == udp.CarrierRaw:
		return 1, "auto: carrier raw sends every EV from one socket without GSO"
	case !gso && c.UDP.Carrier != udp.CarrierPort:
		return 1, "auto: no UDP GSO, and one socket sends every EV"
	}
	k := udp.GSORun(c.MaxDatagram())
	if !gso {
		return k, fmt.Sprintf("auto: sockets without GSO: a run of %d shares its EV's socket and sendmmsg", k)
	}
	return k, fmt.Sprintf("auto: sockets: a run of %d datagrams of %d bytes fills one UDP GSO send", k, c.MaxDatagram())
}

// ChangedKeys lists the YAML key paths whose values differ between a and b, sorted.
func ChangedKeys(a, b *Config) []string {
	var keys []string
	var walk func(p string, x, y any)
	walk = func(p string, x, y any) {
		mx, okx := x.(map[string]any)
		my, oky := y.(map[string]any)
		if !okx || !oky {
			if fmt.Sprint(x) != fmt.Sprint(y) {
				keys = append(keys, p)
			}
			return
		}
		for k := range mx {
			walk(strings.TrimPrefix(p+"."+k, "."), mx[k], my[k])
		}
		for k := range my {
			if _, ok := mx[k]; !ok {
				keys = append(keys, strings.TrimPrefix(p+"."+k, "."))
			}
		}
	}
	walk("", a.View(), b.View())
	slices.Sort(keys)
	return keys
}
