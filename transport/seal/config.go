package seal

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/smartt-transport/smartt/config"
)

// Mode says what sealing protects.
type Mode uint8

// Modes.
const (
	// Off: packets are neither sealed nor checked (the default).
	Off Mode = iota
	// Auth: every byte of every packet is authenticated; payloads travel in clear.
	Auth
	// Encrypt: as Auth, and the payload of DATA packets (the bytes after the 64-byte
	// header) is encrypted too. Headers stay in clear for switches and trimming.
	Encrypt
)

// String names the mode as in the config file.
func (m Mode) String() string {
	switch m {
	case Off:
		return "off"
	case Auth:
		return "auth"
	case Encrypt:
		return "encrypt"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// MarshalText writes the mode's name.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads off, auth or encrypt.
func (m *Mode) UnmarshalText(b []byte) error {
	switch strings.TrimSpace(string(b)) {
	case "off", "":
		*m = Off
	case "auth":
		*m = Auth
	case "encrypt":
		*m = Encrypt
	default:
		return fmt.Errorf("auth mode %q: must be off, auth or encrypt", string(b))
	}
	return nil
}

// KeyLen is the length of a configured key in bytes (64 hex digits in the config file).
const KeyLen = 32

// Key is a 32-byte secret. It reads from hex and never prints: String, Format and
// MarshalText (hence YAML and JSON output, smarttd's config view) show "<redacted>".
type Key [KeyLen]byte

// IsZero reports whether the key is unset.
func (k Key) IsZero() bool { return k == Key{} }

const redacted = "<redacted>"

// String redacts the key.
func (k Key) String() string {
	if k.IsZero() {
		return ""
	}
	return redacted
}

// Format redacts the key under every verb (%x included).
func (k Key) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(k.String())) }

// MarshalText redacts the key: configuration dumps never carry it.
func (k Key) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads 64 hex digits ("" leaves the key unset). Errors never echo the text.
func (k *Key) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "" {
		*k = Key{}
		return nil
	}
	if s == redacted {
		return errors.New("key is \"<redacted>\": a configuration dump does not carry keys; give the 64 hex digits")
	}
	if len(s) != 2*KeyLen {
		return fmt.Errorf("key: must be %d hex digits (%d bytes), got %d characters", 2*KeyLen, KeyLen, len(s))
	}
	var v Key
	if _, err := hex.Decode(v[:], []byte(s)); err != nil {
		return fmt.Errorf("key: must be %d hex digits (%d bytes): not hexadecimal", 2*KeyLen, KeyLen)
	}
	*k = v
	return nil
}

// Peer is a key for the hosts of one prefix.
type Peer struct {
	// Prefix selects the peers (by IP address) this key is for; the longest match wins.
	Prefix netip.Prefix `yaml:"prefix" json:"prefix"`
	// Key is the 32-byte key shared with those peers (hex).
	Key Key `yaml:"key" json:"key"`
	// KeyFile names a file holding the key as hex instead (read by the daemon, not here).
	KeyFile string `yaml:"key_file" json:"key_file"`
}

// Config configures packet authentication (YAML under transport.auth).
type Config struct {
	// Mode is off, auth (authenticate every packet) or encrypt (also encrypt DATA payloads).
	Mode Mode `yaml:"mode" json:"mode"`
	// Key is the fabric-wide key (hex, 32 bytes): used for every peer no Peers entry covers.
	Key Key `yaml:"key" json:"key"`
	// KeyFile names a file holding Key as hex (read by the daemon, which checks that only
	// its owner may read it; the engine never does I/O).
	KeyFile string `yaml:"key_file" json:"key_file"`
	// Peers are per-peer keys chosen by the peer's IP address (the sender looks up the
	// destination, the receiver the source); the longest prefix wins over Key.
	Peers []Peer `yaml:"peers" json:"peers"`
	// RekeyInterval is how long a sending session lives before the sender starts a new
	// one (also after RekeyPackets packets).
	RekeyInterval config.Duration `yaml:"rekey_interval" json:"rekey_interval"`
	// MaxSkew is the clock difference tolerated between hosts: a session may be stamped
	// up to MaxSkew in the receiver's future. It is also how far before a receiver's start
	// a session may have begun: packets captured in that span before a restart can be
	// replayed once to the restarted receiver (docs/security.md).
	MaxSkew config.Duration `yaml:"max_skew" json:"max_skew"`
	// MaxSessions bounds the receiving sessions held (about 2 KiB each); beyond it new
	// sessions are refused and counted, live ones are never evicted.
	MaxSessions int `yaml:"max_sessions" json:"max_sessions"`
}

// DefaultConfig returns authentication off with the documented session parameters.
func DefaultConfig() Config {
	return Config{
		Mode:          Off,
		RekeyInterval: 120_000_000_000,
		MaxSkew:       3_000_000_000,
		MaxSessions:   8192,
	}
}

// Enabled reports whether packets are sealed.
func (c *Config) Enabled() bool { return c.Mode != Off }

// MaxAge is how long after its start a session's packets are accepted: the rekey
// interval, the clock skew and one second for the start time's resolution.
func (c *Config) MaxAge() config.Duration { return c.RekeyInterval + c.MaxSkew + 1_000_000_000 }

// Validate checks every field, naming it (relative to transport.auth) with its range.
// Key files count as keys here: the daemon loads them before building the engine.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Mode > Encrypt {
		bad("auth.mode = %d: must be off, auth or encrypt", c.Mode)
	}
	if !c.Key.IsZero() && c.KeyFile != "" {
		bad("auth.key and auth.key_file: give one of them, not both")
	}
	seen := map[netip.Prefix]int{}
	for i, p := range c.Peers {
		switch {
		case !p.Prefix.IsValid():
			bad("auth.peers[%d].prefix: missing or invalid (want e.g. 10.0.1.0/24)", i)
		case p.Prefix != p.Prefix.Masked():
			bad("auth.peers[%d].prefix = %v: host bits set (did you mean %v?)", i, p.Prefix, p.Prefix.Masked())
		default:
			if j, dup := seen[p.Prefix]; dup {
				bad("auth.peers[%d].prefix = %v: same prefix as auth.peers[%d]", i, p.Prefix, j)
			}
			seen[p.Prefix] = i
		}
		if p.Key.IsZero() == (p.KeyFile == "") {
			bad("auth.peers[%d]: give exactly one of key (64 hex digits, not all zero) and key_file", i)
		}
	}
	if c.Mode != Off && c.Key.IsZero() && c.KeyFile == "" && len(c.Peers) == 0 {
		bad("auth.mode = %v: needs auth.key, auth.key_file or auth.peers", c.Mode)
	}
	if c.RekeyInterval < 1_000_000_000 || c.RekeyInterval > 86_400_000_000_000 {
		bad("auth.rekey_interval = %v: must be in 1s..24h", c.RekeyInterval)
	}
	if c.MaxSkew < 1_000_000_000 || c.MaxSkew > 600_000_000_000 {
		bad("auth.max_skew = %v: must be in 1s..10m", c.MaxSkew)
	}
	if c.MaxSessions < 16 || c.MaxSessions > 1<<20 {
		bad("auth.max_sessions = %d: must be in 16..%d", c.MaxSessions, 1<<20)
	}
	return errors.Join(errs...)
}
