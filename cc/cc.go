// Package cc defines the congestion-control interface the transport engine drives per ACK,
// and the simplest controller, a fixed window. Algorithms live in sub-packages.
package cc

import (
	"github.com/smartt-transport/smartt/hwprofile"
	"github.com/smartt-transport/smartt/transport/wire"
)

// LossCause tells why a packet was judged lost.
type LossCause uint8

// Loss causes.
const (
	LossTrim    LossCause = iota + 1 // a switch trimmed it; the receiver NACKed it
	LossSack                         // later packets were acknowledged (SACK gap beyond the reorder threshold)
	LossTimeout                      // its retransmission timer expired
)

// String names the cause.
func (c LossCause) String() string {
	switch c {
	case LossTrim:
		return "trim"
	case LossSack:
		return "sack"
	case LossTimeout:
		return "timeout"
	}
	return "unknown"
}

// Ack is the feedback of one ACK: what it newly acknowledged and the signals of the data
// packet that triggered it.
type Ack struct {
	Now      int64  // ns, engine clock
	Bytes    int    // payload bytes newly acknowledged by this ACK
	Packets  int    // data packets newly acknowledged
	RTT      int64  // ns, RTT sample of the triggering packet with the receiver's hold time removed; 0 if none
	CE       bool   // the triggering packet arrived CE-marked
	CECount  int    // CE-marked packets the receiver saw since its previous ACK
	EV       uint16 // EV of the triggering packet
	InFlight int    // payload bytes still in flight after this ACK
	// INT holds the per-hop telemetry records the receiver echoed from the triggering
	// packet, first switch first (nil without INT). It aliases the engine's packet
	// buffer: valid only during OnAck, so a controller copies what it keeps.
	INT []wire.INTHop
}

// Loss is the feedback of one packet judged lost (trimmed, SACK gap or timeout).
type Loss struct {
	Now      int64
	Bytes    int // payload bytes of the lost packet
	Cause    LossCause
	EV       uint16
	InFlight int // payload bytes in flight after removing this packet
}

// Controller is a congestion controller for one connection. The engine calls it from a
// single goroutine; implementations must be deterministic and allocation-free.
type Controller interface {
	// OnAck is called once per received ACK that acknowledged new data.
	OnAck(a Ack)
	// OnLoss is called once per packet judged lost, before it is retransmitted.
	OnLoss(l Loss)
	// Window returns the number of payload bytes that may be in flight.
	Window() int
	// PacingRate returns the sending rate in bytes per second, or 0 for window-only control.
	PacingRate() int64
}

// Fixed is a controller with a constant window and no pacing: the engine's default until
// a real algorithm is configured.
type Fixed struct {
	Bytes int // window in payload bytes
}

// OnAck ignores the feedback.
func (f *Fixed) OnAck(Ack) {}

// OnLoss ignores the feedback.
func (f *Fixed) OnLoss(Loss) {}

// Window returns the fixed window.
func (f *Fixed) Window() int { return f.Bytes }

// PacingRate returns 0: a fixed window is not paced.
func (f *Fixed) PacingRate() int64 { return 0 }

// Cost reports a fixed window's hardware cost: a 4-byte window, nothing computed.
func (f *Fixed) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "fixed", StateBytes: 4, Ops: 0, IntegerOnly: true}
}

// Stats are the counters a controller reports for connection snapshots.
type Stats struct {
	QuickAdapts uint64 // QuickAdapt firings (SMaRTT, NSCC)
	Cuts        uint64 // window or rate decreases
}

// StatsReporter is the optional interface of a controller that reports counters
// (quinn's metrics(), Linux's get_info); the engine discovers it per connection.
type StatsReporter interface {
	CCStats() Stats
}
