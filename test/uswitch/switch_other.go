//go:build !linux

package uswitch

import (
	"errors"
	"time"
)

// errNoPacket: the switch's ports are AF_PACKET sockets, which are Linux's.
var errNoPacket = errors.New("uswitch: AF_PACKET switch: not supported on this OS (Linux only)")

// Switch is an AF_PACKET switch; elsewhere than Linux it cannot be opened.
type Switch struct{ epoch time.Time }

// Open fails: AF_PACKET is Linux's.
func Open(Config) (*Switch, error) { return nil, errNoPacket }

// Epoch is the switch clock's zero.
func (s *Switch) Epoch() time.Time { return s.epoch }

// Do does nothing: a switch that cannot open never runs.
func (s *Switch) Do(func(now int64)) {}

// CPUTime is zero: the switch never ran.
func (s *Switch) CPUTime() time.Duration { return 0 }

// Stats are zero: the switch never ran.
func (s *Switch) Stats(int) PortStats { return PortStats{} }

// Stop does nothing.
func (s *Switch) Stop() {}

// Close does nothing.
func (s *Switch) Close() error { return nil }

// Run fails: AF_PACKET is Linux's.
func (s *Switch) Run() error { return errNoPacket }
