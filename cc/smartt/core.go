// Package smartt implements SMaRTT, the sender-based, per-ACK window congestion control
// of "SMaRTT-REPS" (see docs/smartt.md and docs/references.md): fair and multiplicative
// increase and decrease chosen by the ECN mark and the RTT against a target RTT,
// QuickAdapt on trimmed packets or timeouts, FastIncrease and Wait-To-Decrease.
//
// Two implementations make the same decisions: Float (float64 arithmetic, the
// reference) and Fixed (integers only, 32 bytes of state per flow, the form a NIC's
// datapath cores could run). Both implement cc.Controller and hwprofile.Coster.
package smartt

import (
	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/hwprofile"
)

// Stats are a controller's counters, for metrics. They live beside the packed per-flow
// state (they are host instrumentation, not part of what a NIC would keep).
type Stats struct {
	Acks             uint64 // ACKs processed (reactions, with ReactEvery > 1)
	Ignored          uint64 // ACKs ignored after a QuickAdapt (their packets were already in flight)
	FairDecrease     uint64 // FD alone (CE, RTT <= target)
	MultDecrease     uint64 // MD (+FD) (CE, RTT > target)
	FairIncrease     uint64 // FI alone (no CE, RTT > target)
	MultIncrease     uint64 // MI (+FI) (no CE, RTT <= target)
	WTDHeld          uint64 // CE-marked ACKs whose decrease Wait-To-Decrease held back
	QuickAdapt       uint64 // QuickAdapt firings (window set from the bytes acked in the last target RTT)
	FastIncrease     uint64 // FastIncrease activations (inactive -> active)
	FastIncreaseAcks uint64 // ACKs on which FastIncrease added k MTUs
	LossTrim         uint64 // trimmed packets (NACKs) that cut the window
	LossTimeout      uint64 // timeouts that cut the window
	LossSack         uint64 // SACK-gap losses that cut the window (trimming off)
	LossNotCut       uint64 // SACK-gap losses with trimming on: retransmitted, window unchanged
	ClampMin         uint64 // decisions that hit the minimum window
	ClampMax         uint64 // decisions that hit the maximum window
}

// Flag bits and field layout of core.fi (FastIncrease byte count in the low 24 bits,
// flags and the hop index in the high 8) and core.pend (bytes in the low 24 bits, ACK
// count in the high 8).
const (
	fiCountMask  = 1<<24 - 1
	flagTrigger  = 1 << 24 // trigger_qa: a loss armed QuickAdapt
	flagFIActive = 1 << 25 // fi_active
	flagStarted  = 1 << 26 // qa_end is valid (the paper's qa_end != 0)
	hopShift     = 27      // 5 bits of hop index
	pendMask     = 1<<24 - 1
	pendShift    = 24
)

// core is the integer part of the per-flow state, shared by both implementations
// (24 bytes).
type core struct {
	acked  uint32 // bytes acknowledged since the current target-RTT window began (saturating)
	ignore uint32 // bytes whose feedback is still to be ignored after a QuickAdapt
	fi     uint32 // fi_count (24 bits, saturating) | trigger_qa | fi_active | started | hop (5 bits)
	qaEnd  uint32 // end of the QuickAdapt window: low 32 bits of the ns clock
	brtt   uint32 // learned base RTT, ns (0: none yet)
	pend   uint32 // ReactEvery > 1: bytes (24 bits, saturating) | ACKs (8 bits) since the last reaction
}

func satAdd(a, b uint32) uint32 {
	if s := a + b; s >= a {
		return s
	}
	return ^uint32(0)
}

// clampSize limits an ACK's byte count to what the fixed-point products are sized for.
func clampSize(n int) uint32 {
	return uint32(min(max(n, 0), fiCountMask))
}

// batch implements ReactEvery: it accumulates size and reports whether to react now,
// with the summed bytes: after Every ACKs, or earlier once a window's worth of bytes
// (cwnd, bytes) was acknowledged, so that a flow with a small window still reacts at
// least once per window (the equations are per-ACK linearisations; applied to many
// windows of bytes at once, FD alone would cut by more than the window).
func (c *core) batch(p *Params, size, cwnd uint32) (uint32, bool) {
	if p.Every <= 1 {
		return size, true
	}
	b := min(uint64(c.pend&pendMask)+uint64(size), pendMask)
	n := c.pend>>pendShift + 1
	if int(n) < p.Every && b < uint64(cwnd) {
		c.pend = n<<pendShift | uint32(b)
		return 0, false
	}
	c.pend = 0
	return uint32(b), true
}

// account adds an ACK's bytes to acked and to the ignored bytes; it reports whether
// the ACK's feedback is to be ignored (Algorithm 1, lines 4-9).
func (c *core) account(size uint32) bool {
	c.acked = satAdd(c.acked, size)
	if c.ignore > size {
		c.ignore -= size
		return true
	}
	c.ignore = 0
	return false
}

// rtts returns the flow's base and target RTT, learning the base RTT from rtt (> 0) if
// configured.
func (c *core) rtts(p *Params, rtt int64) (brtt, trtt int64) {
	if p.Learn {
		if rtt > 0 && (c.brtt == 0 || rtt < int64(c.brtt)) {
			c.brtt = uint32(min(rtt, maxRTTLimit))
		}
		if c.brtt != 0 {
			return int64(c.brtt), p.target(int64(c.brtt))
		}
	}
	b := p.baseRTT(c.fi >> hopShift)
	if p.Lower {
		if rtt > 0 && rtt < b && (c.brtt == 0 || rtt < int64(c.brtt)) {
			c.brtt = uint32(rtt)
		}
		if c.brtt != 0 {
			b = min(b, int64(c.brtt))
		}
	}
	return b, p.target(b)
}

// qaDue reports whether the QuickAdapt window has ended at now (Algorithm 2, line 3).
// The end is kept as 32-bit nanoseconds: serial-number comparison, and an end that
// seems more than one target RTT ahead can only be a wrapped stale one (the flow was
// idle for a multiple of 4.3 s), so it counts as past; at worst QuickAdapt is delayed
// by one target RTT.
func (c *core) qaDue(now int64, trtt int64) bool {
	if c.fi&flagStarted == 0 {
		return true
	}
	d := int32(uint32(now) - c.qaEnd)
	return d >= 0 || int64(d) < -trtt
}

// quickAdapt is Algorithm 2's bookkeeping, shared by both implementations: at most once
// per target RTT, if a loss armed it, QuickAdapt fires: it reports the bytes acknowledged
// in the last target RTT (at least one MTU), from which the caller sets the window, and
// the feedback of the bytes now in flight is to be ignored.
func (c *core) quickAdapt(p *Params, st *Stats, now, trtt int64, inflight int) (acked uint32, fire bool) {
	if !c.qaDue(now, trtt) {
		return 0, false
	}
	if c.fi&(flagTrigger|flagStarted) == flagTrigger|flagStarted {
		c.fi &^= flagTrigger
		if !p.NoQA {
			fire = true
			st.QuickAdapt++
			acked = max(c.acked, uint32(p.MTU))
			c.ignore = uint32(min(max(inflight, 0), 1<<32-1))
		}
	}
	c.qaEnd = uint32(now + trtt)
	c.fi |= flagStarted
	c.acked = 0
	return acked, fire
}

// fastIncrease is Algorithm 3's test, shared by both implementations: after a window's
// worth of bytes (win, the window in whole bytes) at about the base RTT without CE, it
// reports true on every ACK until a congested one; the caller adds k MTUs.
func (c *core) fastIncrease(p *Params, st *Stats, size uint32, rtt, brtt int64, ce bool, win uint32) bool {
	if p.NoFI {
		return false
	}
	if !ce && rtt <= brtt+p.FITol {
		n := min(c.fi&fiCountMask+size, fiCountMask)
		c.fi = c.fi&^fiCountMask | n
		// n > win compares with the exact window too: n is a whole number of bytes.
		if n > win || c.fi&flagFIActive != 0 {
			if c.fi&flagFIActive == 0 {
				st.FastIncrease++
			}
			st.FastIncreaseAcks++
			c.fi |= flagFIActive
			return true
		}
		return false
	}
	c.fi &^= fiCountMask | flagFIActive
	return false
}

// loss is the shared part of OnLoss (Algorithm 1, lines 28-34): it counts the loss and
// reports the bytes to cut the window by, or false when this cause does not cut it
// (lossCuts). The lost packet's feedback has arrived: it counts toward the ignored bytes
// (Algorithm 1 adds every packet's size before branching); it was not delivered, so it
// does not count as acknowledged. QuickAdapt is armed; the caller runs it once no
// feedback is left to ignore.
func (c *core) loss(p *Params, st *Stats, l cc.Loss) (uint32, bool) {
	size := clampSize(l.Bytes)
	if !lossCuts(p, l.Cause) {
		st.LossNotCut++
		return 0, false
	}
	switch l.Cause {
	case cc.LossTrim:
		st.LossTrim++
	case cc.LossTimeout:
		st.LossTimeout++
	default:
		st.LossSack++
	}
	c.ignore -= min(c.ignore, size)
	c.fi |= flagTrigger
	return size, true
}

// cause reports whether a loss of this cause cuts the window and arms QuickAdapt.
// Trims and timeouts do (Algorithm 1, line 28). A SACK-gap loss does only when the
// network does not trim: there, a drop is the congestion signal the paper's aggressive
// timeout stands for, and the engine's SACK-gap detector sees it first. With trimming, a
// congestion drop arrives as a trim, so a SACK gap means reordering beyond the threshold
// or a failure: the packet is retransmitted and the window left alone.
//
// With NoTimeoutCut a timeout does not either (the REPS artifact's htsim).
func lossCuts(p *Params, cause cc.LossCause) bool {
	if cause == cc.LossTimeout && p.NoTOCut {
		return false
	}
	return cause != cc.LossSack || !p.Trimming
}

// SetHops selects the base RTT of the flow's path from Config.BaseRTTPerHop by its hop
// count (the engine may call it when it learns the path length).
func (c *core) SetHops(n int) {
	c.fi = c.fi&^(31<<hopShift) | uint32(min(max(n, 0), maxHops-1))<<hopShift
}

// Both implementations are congestion controllers with a hardware cost.
var (
	_ cc.Controller    = (*Float)(nil)
	_ cc.Controller    = (*Fixed)(nil)
	_ hwprofile.Coster = (*Float)(nil)
	_ hwprofile.Coster = (*Fixed)(nil)
)
