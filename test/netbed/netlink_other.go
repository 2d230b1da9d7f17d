//go:build !linux

package netbed

import (
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/smartt-transport/smartt/config"
)

// errNoNetns: the testbed is built of Linux network namespaces, veths, tc and netlink.
var errNoNetns = errors.New("netbed: network-namespace testbed: not supported on this OS (Linux only)")

func setGSOMaxSegs(*netlink.Handle, netlink.Link, int) error { return errNoNetns }

func permanentNeigh(index int, ip netip.Addr, hw net.HardwareAddr) *netlink.Neigh {
	return &netlink.Neigh{LinkIndex: index, IP: ip.AsSlice(), HardwareAddr: hw}
}

func (t *Testbed) setRate(int, config.Rate) error { return errNoNetns }

// Flaky fails: its loss is a tc BPF classifier, which is Linux's.
func (t *Testbed) Flaky(string, float64, time.Duration) error { return errNoNetns }

// SetRate fails: link rates are tc qdiscs, which are Linux's.
func (t *Testbed) SetRate(string, config.Rate) error { return errNoNetns }

// LinkDown fails: links are veths, which are Linux's.
func (t *Testbed) LinkDown(string) error { return errNoNetns }

// LinkUp fails: links are veths, which are Linux's.
func (t *Testbed) LinkUp(string) error { return errNoNetns }

// Stats fails: interface counters come from netlink, which is Linux's.
func (t *Testbed) Stats(string) ([]IfStats, error) { return nil, errNoNetns }

// RxPackets fails: interface counters come from netlink, which is Linux's.
func (t *Testbed) RxPackets(string) (uint64, error) { return 0, errNoNetns }

// Blaster sends UDP load with sendmmsg, which is Linux's; elsewhere it cannot be opened.
type Blaster struct{}

// NewBlaster fails: the sender runs in a network namespace with sendmmsg.
func NewBlaster(string, int, netip.AddrPort, int) (*Blaster, error) { return nil, errNoNetns }

// Send sends nothing.
func (b *Blaster) Send(int, <-chan struct{}) int { return 0 }

// Close does nothing.
func (b *Blaster) Close() error { return nil }
