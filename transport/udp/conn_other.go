//go:build !linux

package udp

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// ErrUnsupportedOS: the socket layer is built on Linux's recvmmsg/sendmmsg, UDP GSO/GRO,
// error queues and AF_XDP; elsewhere Open checks the Config and then fails with it.
var ErrUnsupportedOS = errors.New("udp: the socket layer is not supported on this OS (Linux only)")

// Conn is the socket layer of one local address; elsewhere than Linux it cannot be opened.
type Conn struct{ cfg Config }

// Open checks cfg and fails with ErrUnsupportedOS.
func Open(cfg Config) (*Conn, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	return nil, ErrUnsupportedOS
}

// OpenShards checks cfg and fails with ErrUnsupportedOS.
func OpenShards(cfg Config, n int, steering string) ([]*Conn, error) {
	if n < 1 {
		return nil, fmt.Errorf("udp: %d shards: need at least 1", n)
	}
	_, err := Open(cfg)
	return nil, err
}

// TxBuffers is 0: nothing can be sent.
func (c *Conn) TxBuffers([]Packet) int { return 0 }

// ReadBatch fails with ErrUnsupportedOS.
func (c *Conn) ReadBatch([]Packet) (int, error) { return 0, ErrUnsupportedOS }

// ReadBatchInPlace fails with ErrUnsupportedOS.
func (c *Conn) ReadBatchInPlace([]Packet) (int, error) { return 0, ErrUnsupportedOS }

// WriteBatch fails with ErrUnsupportedOS.
func (c *Conn) WriteBatch([]Packet) (int, error) { return 0, ErrUnsupportedOS }

// TxStamps is 0: nothing was sent.
func (c *Conn) TxStamps([]TxStamp) int { return 0 }

// GathersPayload is false.
func (c *Conn) GathersPayload() bool { return false }

// Caps is empty: nothing was granted.
func (c *Conn) Caps() Caps { return Caps{} }

// LocalAddr is the configured listen address.
func (c *Conn) LocalAddr() netip.AddrPort { return c.cfg.Listen }

// EVPort is the configured source port of ev.
func (c *Conn) EVPort(ev uint16) uint16 { return c.cfg.EVPortBase + ev }

// FlowLabel is ev's flow label (ev+1, as on Linux).
func (c *Conn) FlowLabel(ev uint16) uint32 { return uint32(ev) + 1 }

// EVS is the configured EV pool size.
func (c *Conn) EVS() int { return c.cfg.EVS }

// SetReadDeadline fails with ErrUnsupportedOS.
func (c *Conn) SetReadDeadline(time.Time) error { return ErrUnsupportedOS }

// Stats are zero.
func (c *Conn) Stats() Stats { return Stats{} }

// Close does nothing.
func (c *Conn) Close() error { return nil }

// WaitUnreachable fails with ErrUnsupportedOS.
func (c *Conn) WaitUnreachable([]Unreachable) (int, error) { return 0, ErrUnsupportedOS }
