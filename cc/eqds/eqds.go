// Package eqds implements the two halves of EQDS, the edge-queued datagram service
// (Olteanu et al., "An edge-queued datagram service for all datacenter traffic", NSDI
// 2022): receiver-driven credit. A sender starts with a speculative window of
// unscheduled bytes (about one BDP), then sends only against credit that the receiver
// grants in PULL packets. The receiver grants, for every data packet that reaches it
// (whole or trimmed to its header), that packet's bytes again (packet conservation, as
// in NDP), and one pacer per receiving host spaces all its PULLs at its link rate, so
// the data of every sender together arrives at the rate the last hop can carry.
//
// Sender is the per-connection sender state (a cc.Controller whose Window is only a
// safety cap; the engine asks CanSend before every transmission), PullState the
// per-connection receiver state, and Pacer the per-host pull pacer. All three are
// integer-only, allocation-free and driven by the engine's injected clock.
package eqds

import (
	"errors"
	"fmt"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/hwprofile"
)

// Config holds the parameters (YAML section "eqds").
type Config struct {
	// SpeculativeBDP is the sender's first window of unscheduled bytes, in
	// bandwidth-delay products (default 1, the paper's); also the most credit a sender
	// holds unused. At least one MTU.
	SpeculativeBDP float64 `yaml:"speculative_bdp"`
	// PullRate is the receiver's pacer rate as a fraction of its link rate (default 1).
	PullRate float64 `yaml:"pull_rate"`
	// WireOverhead is the bytes below the datagram (Ethernet, IP, UDP, preamble, gap)
	// each solicited data packet occupies on the receiver's link, which the pacer
	// accounts for (default 0, the simulator's model; about 66 on Ethernet).
	WireOverhead int `yaml:"wire_overhead"`
	// QueueTargetMTUs is the queueing the pacer lets stand at the receiver's last hop,
	// in MTUs of transmission time (default 2; 0 turns the drain off). The paper's
	// pacer pulls at line rate and relies on shallow, trimming switch buffers; with the
	// 1-BDP buffers of the SMaRTT paper's settings the queue the speculative first
	// windows build would stand for ever, since data then arrives exactly as fast as
	// it leaves. So the receiver estimates its queueing delay from each arrival's
	// one-way delay above the connection's minimum (clock offsets cancel), and when it
	// exceeds the target it delays the next PULL by the excess, once per two base RTTs.
	QueueTargetMTUs int `yaml:"queue_target_mtus"`
	// PullBurstMTUs bounds how far a late pacer catches up, in PULLs of one MTU (default
	// 8): a driver whose timers fire late (a daemon on a loaded host) sends that many at
	// once to keep the rate; an idle pacer banks nothing. 1 is strict spacing.
	PullBurstMTUs int `yaml:"pull_burst_mtus"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{SpeculativeBDP: 1, PullRate: 1, WireOverhead: 0, QueueTargetMTUs: 2, PullBurstMTUs: 8}
}

// rateOne is pull_rate = 1 in the pacer's fixed point (Q10).
const rateOne = 1024

// Params are the derived per-endpoint constants, shared by every connection.
type Params struct {
	mtu      int64
	spec     int64  // speculative window = credit cap, bytes
	debtCap  uint64 // most bytes a connection may have requested and not yet been granted
	hdr      int64  // bytes per data packet beyond its payload on the receiver's link
	rateQ    int64  // link rate (bits/s) x pull rate (Q10)
	linkRate int64
	slack    int64 // ns: the spacing of one full-size grant
	burst    int64 // ns: a late pacer catches up at most this much (pull_burst_mtus spacings)
	target   int64 // ns of queueing delay left standing (0: no drain)
	hold     int64 // ns: base RTT; a drain waits two of them (and itself) to take effect
}

// NewParams validates cfg for a network; hdrBytes is what a data packet carries beyond
// its payload as a datagram (the DATA header, and the seal trailer if any).
func NewParams(cfg Config, net config.Network, hdrBytes int) (*Params, error) {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("eqds."+format, a...)) }
	if !(cfg.SpeculativeBDP > 0 && cfg.SpeculativeBDP <= 100) {
		bad("speculative_bdp = %v: must be in (0, 100]", cfg.SpeculativeBDP)
	}
	if !(cfg.PullRate >= 0.01 && cfg.PullRate <= 1) {
		bad("pull_rate = %v: must be in 0.01..1 (a fraction of the link rate)", cfg.PullRate)
	}
	if cfg.WireOverhead < 0 || cfg.WireOverhead > 1024 {
		bad("wire_overhead = %d: must be in 0..1024 bytes", cfg.WireOverhead)
	}
	if cfg.PullBurstMTUs < 1 || cfg.PullBurstMTUs > 1024 {
		bad("pull_burst_mtus = %d: must be in 1..1024", cfg.PullBurstMTUs)
	}
	if cfg.QueueTargetMTUs < 0 || cfg.QueueTargetMTUs > 1024 {
		bad("queue_target_mtus = %d: must be in 0..1024 (0: no drain)", cfg.QueueTargetMTUs)
	}
	if hdrBytes < 0 || net.MTU < 1 || net.LinkRate < 1 {
		errs = append(errs, fmt.Errorf("eqds: network mtu %d, link rate %d, header %d", net.MTU, net.LinkRate, hdrBytes))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p := &Params{mtu: int64(net.MTU), hdr: int64(hdrBytes + cfg.WireOverhead), linkRate: net.LinkRate}
	p.spec = max(int64(cfg.SpeculativeBDP*float64(net.BDP())), p.mtu)
	if p.spec > 1<<30 {
		return nil, fmt.Errorf("eqds.speculative_bdp = %v: the window (%d bytes) must be at most 1 GiB", cfg.SpeculativeBDP, p.spec)
	}
	// An honest sender's requests not yet granted never exceed its speculative window
	// (every byte it sends is one the receiver granted, or one of that window): twice
	// that leaves room for refunds of packets that were late rather than lost.
	p.debtCap = uint64(2 * p.spec)
	p.rateQ = net.LinkRate * int64(cfg.PullRate*rateOne+0.5)
	p.slack = (p.mtu + p.hdr) * 8_000_000_000 * rateOne / p.rateQ
	p.target = int64(cfg.QueueTargetMTUs) * p.slack
	p.burst = int64(max(cfg.PullBurstMTUs, 1)) * p.slack
	p.hold = net.BaseRTT
	return p, nil
}

// Speculative returns the speculative window in bytes (also the credit cap).
func (p *Params) Speculative() int { return int(p.spec) }

// DebtCap returns the most bytes a connection may have requested and not been granted.
func (p *Params) DebtCap() uint64 { return p.debtCap }

// state is the sender's per-flow state as a NIC holds it; Cost().StateBytes counts it.
type state struct {
	credit    int64  // scheduled credit: granted by PULLs or refunded, for any transmission
	unsched   int64  // speculative credit left, for first transmissions only
	granted   uint64 // the highest cumulative grant seen in a PULL
	requested uint64 // bytes sent: each transmission asks for its replacement
}

// Sender is one connection's sender half: it holds the credit the receiver granted.
type Sender struct {
	p        *Params
	s        state
	refunded uint64 // bytes of lost packets whose credit came back (tests, snapshots)
	surplus  uint64 // granted bytes dropped at the credit cap
}

// New returns the sender state of one connection, holding the speculative window.
func New(p *Params) *Sender {
	return &Sender{p: p, s: state{unsched: p.spec}}
}

// CanSend reports whether size bytes of credit are available for a transmission. As in
// NDP, a retransmission waits for scheduled credit (a PULL: the receiver pulls for every
// trimmed header); only first transmissions may use the speculative window, or a
// sender whose window outlasts its message would resend trimmed packets into the
// overflowing port at once, and trim them again.
func (s *Sender) CanSend(size int, retx bool) bool {
	if retx {
		return s.s.credit >= int64(size)
	}
	return s.s.credit+s.s.unsched >= int64(size)
}

// OnSend spends size bytes of credit on a transmission (speculative credit first for a
// new packet), which asks the receiver for as much again.
func (s *Sender) OnSend(size int, retx bool) {
	n := int64(size)
	if !retx {
		u := min(s.s.unsched, n)
		s.s.unsched -= u
		n -= u
	}
	s.s.credit -= n
	s.s.requested += uint64(size)
}

// Respeculate gives a sender with nothing outstanding a fresh speculative window (a new
// burst is a new flow, as in NDP and EQDS): the credit it holds in all is the window.
func (s *Sender) Respeculate() { s.s.unsched = max(s.s.unsched, s.p.spec-s.s.credit) }

// room is the scheduled credit the sender may still take: it holds at most one
// speculative window in all.
func (s *Sender) room() int64 { return s.p.spec - s.s.unsched - s.s.credit }

// PullVerdict is what the sender made of a PULL.
type PullVerdict uint8

// PULL verdicts.
const (
	PullOK     PullVerdict = iota // new credit taken (up to the cap)
	PullStale                     // no newer than a grant already seen: reordered or duplicated
	PullExcess                    // grants more than was ever requested: dropped whole
)

// OnPull takes a PULL's cumulative grant. A grant beyond the bytes the sender has asked
// for (sent) is refused whole; credit beyond the speculative window is dropped, so
// credit stays bounded whatever a receiver sends.
func (s *Sender) OnPull(granted uint64) PullVerdict {
	st := &s.s
	if granted <= st.granted {
		return PullStale
	}
	if granted > st.requested {
		return PullExcess
	}
	add := int64(granted - st.granted)
	st.granted = granted
	if r := s.room(); add > r {
		s.surplus += uint64(add - r)
		add = r
	}
	st.credit += add
	return PullOK
}

// OnAck ignores the ACK: EQDS's sender has no congestion control of its own.
func (s *Sender) OnAck(cc.Ack) {}

// OnLoss returns the credit of a packet lost in the network (SACK gap or timeout): the
// receiver never saw it, so it will never pull for it. A trimmed packet's header did
// arrive and the receiver pulls for it, so a trim returns nothing here.
func (s *Sender) OnLoss(l cc.Loss) {
	if l.Cause == cc.LossTrim {
		return
	}
	s.refunded += uint64(l.Bytes)
	s.s.credit += min(int64(l.Bytes), s.room())
}

// Window returns two speculative windows: a safety cap that credit keeps from binding
// (credit, not the window, decides when a packet may go).
func (s *Sender) Window() int { return int(2 * s.p.spec) }

// PacingRate returns 0: the receiver's pacer spaces the credit.
func (s *Sender) PacingRate() int64 { return 0 }

// Credit returns the bytes that may be sent now (scheduled and speculative).
func (s *Sender) Credit() int { return int(s.s.credit + s.s.unsched) }

// Granted returns the cumulative grant taken from PULLs.
func (s *Sender) Granted() uint64 { return s.s.granted }

// Requested returns the bytes sent (new and retransmitted).
func (s *Sender) Requested() uint64 { return s.s.requested }

// Refunded returns the bytes whose credit came back because their packets were lost.
func (s *Sender) Refunded() uint64 { return s.refunded }

// Surplus returns the granted bytes dropped at the credit cap.
func (s *Sender) Surplus() uint64 { return s.surplus }

// StateBytes is one connection's EQDS state on a NIC: the sender's (credit, grant,
// requests), the receiver's PullState and its link in the host's pull queue.
const StateBytes = 32 + 40 + 4

// Cost reports one connection's cost. The decision is a PULL (receiver: take one MTU
// off the debt, space the next PULL; sender: validate, add credit, cap) or a
// transmission (compare, subtract); the host's pacer and pull queue are the global part.
func (s *Sender) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "eqds", StateBytes: StateBytes, GlobalBytes: 9*8 + 24, Ops: 32, IntegerOnly: true}
}

// PullState is one connection's receiver half: the bytes its arrivals asked for and the
// bytes granted so far.
type PullState struct {
	target  uint64 // bytes requested by arrivals
	granted uint64 // bytes granted in PULLs (the cumulative field of the next PULL)
	owdMin  int64  // lowest one-way delay seen (receive minus send timestamp), ns; 0: none yet
	wMin    int64  // lowest queueing delay in window wEpoch, ns
	wEpoch  uint32 // the pacer's window wMin belongs to
}

// Request adds n bytes asked for by an arriving packet (data, or a trimmed header) and
// reports false if the connection's outstanding requests would pass the cap: the
// excess is not granted (an honest sender never gets there; see Params.DebtCap).
func (r *PullState) Request(n int, p *Params) bool {
	if r.target+uint64(n)-r.granted > p.debtCap {
		r.target = r.granted + p.debtCap
		return false
	}
	r.target += uint64(n)
	return true
}

// QueueDelay folds an arrival's one-way delay (its receive time minus the sender's
// transmit timestamp: the two clocks' offset included, which cancels) into the
// connection's minimum and returns the delay above it: the packet's queueing.
func (r *PullState) QueueDelay(owd int64) int64 {
	// Offsets may make owd any value; shift by 2^62 so 0 can mean "none yet".
	v := owd + 1<<62
	if r.owdMin == 0 || v < r.owdMin {
		r.owdMin = v
	}
	return v - r.owdMin
}

// Record keeps an arrival's queueing delay qd for the pacer's window epoch.
func (r *PullState) Record(epoch uint32, qd int64) {
	if r.wEpoch != epoch {
		r.wEpoch, r.wMin = epoch, qd
		return
	}
	r.wMin = min(r.wMin, qd)
}

// WindowMin returns the lowest queueing delay recorded in window epoch, if any.
func (r *PullState) WindowMin(epoch uint32) (int64, bool) {
	return r.wMin, r.wEpoch == epoch && epoch != 0
}

// Pending returns the bytes requested and not yet granted.
func (r *PullState) Pending() uint64 { return r.target - r.granted }

// Granted returns the bytes granted so far (0: no PULL sent yet).
func (r *PullState) Granted() uint64 { return r.granted }

// Grant takes up to one MTU off the pending requests and returns the bytes granted and
// the new cumulative grant for the PULL.
func (r *PullState) Grant(p *Params) (g int, cum uint64) {
	n := min(r.target-r.granted, uint64(p.mtu))
	r.granted += n
	return int(n), r.granted
}

// Pacer is a receiving host's pull pacer: one for every connection to the host, so the
// data it solicits arrives at no more than the link rate, whatever the number of senders.
type Pacer struct {
	next      int64  // earliest time of the next PULL, ns
	rem       int64  // carried remainder of the spacing, in bit-ns x Q10 units
	drainFrom int64  // no new measurement window before this time, ns
	windowEnd int64  // end of the open measurement window, ns (0: none)
	epoch     uint32 // the window's number
	// Drains counts drain epochs (tests, snapshots).
	Drains uint64
}

// Ready reports whether a PULL may leave at now.
func (pc *Pacer) Ready(now int64) bool { return now >= pc.next }

// Next returns the earliest time of the next PULL.
func (pc *Pacer) Next() int64 { return pc.next }

// Wake tells the pacer that requests arrived while it had none: an idle pacer banks no
// time, so spacing starts at now.
func (pc *Pacer) Wake(now int64) {
	if now > pc.next {
		pc.next, pc.rem = now, 0
	}
}

// OnPull accounts a grant of g payload bytes sent at now: the next PULL waits until the
// packet it solicits (payload, header, overhead) has had time to cross the link. A busy
// pacer polled late (the driver's timer fired after the deadline) keeps its schedule,
// so it may send the PULLs it owes at once, up to pull_burst_mtus of them: timer
// lateness does not lower the rate.
func (pc *Pacer) OnPull(now int64, g int, p *Params) {
	if now > pc.next+p.burst {
		pc.next, pc.rem = now-p.burst, 0
	}
	bits := (int64(g)+p.hdr)*8_000_000_000*rateOne + pc.rem
	pc.next += bits / p.rateQ
	pc.rem = bits % p.rateQ
}

// The drain. The last hop's queue delays every packet to this host, whatever its
// sender and path, while a fabric queue delays only the packets of some paths, and a
// connection's minimum one-way delay may itself include some queueing (its first
// packets queued behind other senders'). So the pacer measures in windows of half a
// base RTT: each connection keeps the lowest queueing delay of its arrivals in the
// window (PullState.Record: its path-specific queueing mostly excluded), and the
// largest of those minima over the connections being pulled (the one whose minimum is
// nearest the truth) is the last hop's queue. Above the target, the next PULL is
// delayed by the excess: the gap reaches the port about one RTT later and drains that
// much of the queue, the link kept busy by the queue itself meanwhile. No new window
// opens before two base RTTs and the gap have passed, so that packets still arriving
// through the old queue are not counted again.

// Measuring returns the window an arrival at now is recorded in, or false if none is
// open (draining, or the drain is off); the first arrival after a drain opens one.
func (pc *Pacer) Measuring(now int64, p *Params) (uint32, bool) {
	if p.target == 0 || now < pc.drainFrom {
		return 0, false
	}
	if pc.windowEnd == 0 {
		pc.windowEnd = now + p.hold/2
		pc.epoch++
	}
	return pc.epoch, true
}

// WindowDone reports whether the open window has ended at now: the engine then passes
// the largest per-connection minimum of Epoch to Drain.
func (pc *Pacer) WindowDone(now int64) bool { return pc.windowEnd != 0 && now >= pc.windowEnd }

// Epoch returns the current window's number.
func (pc *Pacer) Epoch() uint32 { return pc.epoch }

// Drain closes the window with the last hop's queueing delay q (ns; < 0: no estimate)
// and delays the next PULL by its excess over the target.
func (pc *Pacer) Drain(now, q int64, p *Params) {
	pc.windowEnd = 0
	if q <= p.target {
		return
	}
	gap := q - p.target
	pc.next = max(pc.next, now) + gap
	pc.drainFrom = now + 2*p.hold + gap
	pc.Drains++
}

// OnTrim takes the arrival of a trimmed header. The header took its time on the
// receiver's link too (it crossed it ahead of the data, at priority), so the next PULL
// waits that much longer: PULLs spaced for data alone would overfill the port by the
// headers and trim again.
func (pc *Pacer) OnTrim(now int64, p *Params) {
	pc.next = max(pc.next, now-p.burst)
	bits := p.hdr*8_000_000_000*rateOne + pc.rem
	pc.next += bits / p.rateQ
	pc.rem = bits % p.rateQ
}
