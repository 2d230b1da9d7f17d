package reps

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"unsafe"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/hwprofile"
)

// Time in the packed state: 32-bit timestamps in units of 256 ns (wrapping every ~18
// minutes; every comparison is a wrapped difference) and RTTs in 16 bits of 64 ns units
// (saturating at ~4.2 ms).
const (
	tShift   = 8
	rttShift = 6
	maxRTT   = 0xffff << rttShift
	maxSpan  = 1_000_000_000 // longest freeze duration or RTT window, ns
)

// ctl byte of the packed state.
const (
	headMask    = 0x07 // next entry to write (the oldest once the buffer is full)
	filledShift = 3    // bits 3..6: entries ever written, 0..8
	filledMask  = 0x0f << filledShift
	freezeBit   = 0x80
)

// state is REPS's per-connection state packed as a NIC holds it: 25 bytes for 8
// entries (paper Table 1: 193 bits). It differs from Table 1 in two ways: the count of
// valid entries is the popcount of the valid bits, and its byte holds the 16-bit max
// RTT that judges failures without trimming; t is a union (freezing: the exit time,
// otherwise the start of the RTT window).
type state struct {
	ev      [2 * MaxEntries]byte // cached EVs, little endian
	valid   uint8                // bit i: entry i was cached and not reused since
	ctl     uint8                // head, filled count, freezing bit
	explore uint8                // packets still to explore; while freezing: round-robin cursor
	maxRTT  [2]byte              // highest RTT in the current window, 64 ns units
	t       [4]byte              // 256 ns units
}

// StateBytes is the packed per-connection state of REPS with n entries.
func StateBytes(n int) int {
	return int(unsafe.Sizeof(state{})) - 2*(MaxEntries-n)
}

func (s *state) evAt(i uint8) uint16     { return binary.LittleEndian.Uint16(s.ev[2*i:]) }
func (s *state) setEV(i uint8, v uint16) { binary.LittleEndian.PutUint16(s.ev[2*i:], v) }
func (s *state) time() uint32            { return binary.LittleEndian.Uint32(s.t[:]) }
func (s *state) setTime(v uint32)        { binary.LittleEndian.PutUint32(s.t[:], v) }
func (s *state) rtt() uint16             { return binary.LittleEndian.Uint16(s.maxRTT[:]) }
func (s *state) setRTT(v uint16)         { binary.LittleEndian.PutUint16(s.maxRTT[:], v) }

// params are REPS's per-endpoint constants (in hardware: global registers).
type params struct {
	evs        int
	n          uint8
	explore    uint8  // packets explored when new or idle
	freezeU    uint32 // freeze duration, time units
	windowU    uint32 // RTT window, time units
	failRTT    uint16 // 64 ns units
	freezing   bool
	trimming   bool
	sackFails  bool
	cleanEVs   bool
	extend     bool // Config.FreezeExtend: a failure while frozen pushes the exit
	maxFreezeU int32
	forceAt    int64  // Config.ForceFreezeAt, ns (0: off)
	probe      bool   // Config.FreezeExit "probe"
	probeU     uint32 // Config.ProbeInterval, time units
}

// probeState is what exit by probing adds beside the packed state (6 bytes in hardware:
// Cost counts them): the EV whose loss froze the buffer, and when the last probe went.
type probeState struct {
	ev   uint16
	sent uint32 // time units; the next probe is due probeU after it
	set  bool   // ev is a failed EV to probe (a forced freeze has none)
}

// REPS is recycled entropy packet spraying (the REPS paper, docs/references.md): EVs whose ACKs came back
// unmarked are cached in a circular buffer and reused, oldest first, once each; with
// nothing cached a random EV is explored; a new or idle connection explores its first
// BDP; a loss judged a failure freezes the buffer (cached EVs are reused even if already
// used, nothing is explored) for FreezeDuration from the freeze's start; leaving
// freezing forgets the buffer and explores a BDP.
type REPS struct {
	s        state
	p        params
	rng      *rand.Rand
	episodes uint64 // metrics only: not part of the NIC state
	pr       probeState
}

// NewREPS returns REPS for one connection; cfg must be valid (Config.Validate).
func NewREPS(cfg Config, env Env, rng *rand.Rand) *REPS {
	cfg = cfg.derive(env.BaseRTT)
	n := min(max(cfg.Entries, 1), MaxEntries)
	r := &REPS{rng: rng, p: params{
		evs:        env.evs(),
		n:          uint8(n),
		explore:    uint8(min(max(env.BDPPackets, 1), 255)),
		freezeU:    uint32(cfg.FreezeDuration >> tShift),
		windowU:    max(uint32(cfg.RTTWindow>>tShift), 1),
		failRTT:    uint16(min(int64(cfg.FailureRTT)>>rttShift, 0xffff)),
		freezing:   !cfg.NoFreeze,
		trimming:   env.Trimming,
		sackFails:  !cfg.TimeoutOnly,
		cleanEVs:   cfg.CleanEVs,
		extend:     cfg.FreezeExtend,
		maxFreezeU: int32(maxSpan >> tShift),
		forceAt:    int64(cfg.ForceFreezeAt),
		probe:      cfg.FreezeExit == FreezeExitProbe,
		probeU:     max(uint32(cfg.ProbeInterval>>tShift), 1),
	}}
	return r
}

func (r *REPS) filled() uint8 { return (r.s.ctl & filledMask) >> filledShift }

// oldest returns the index of the oldest cached entry.
func (r *REPS) oldest() uint8 {
	o := r.s.ctl&headMask + r.p.n - r.filled()
	if o >= r.p.n {
		o -= r.p.n
	}
	return o
}

// NextEV returns the EV of the next data packet.
func (r *REPS) NextEV(now int64, _ int, retx bool) uint16 {
	s := &r.s
	nowU := uint32(now >> tShift)
	if r.p.forceAt > 0 && now >= r.p.forceAt {
		r.forceFreeze(nowU)
	}
	d := int32(nowU - s.time())
	if s.ctl&freezeBit != 0 {
		r.expire(nowU)
	} else if d < 0 || uint32(d) > 2*r.p.windowU {
		// New, or no ACK for two RTT windows: what is cached is stale; explore a BDP.
		s.valid = 0
		s.explore = r.p.explore
		s.setTime(nowU)
		s.setRTT(0)
	}
	frozen := s.ctl&freezeBit != 0
	if frozen && !retx && r.pr.set && int32(nowU-r.pr.sent) >= int32(r.p.probeU) {
		// A probe of the path that failed: new data only, or a connection whose last
		// packets are retransmissions (each after a timeout, longer than the interval)
		// would send every one of them into the failure.
		r.pr.sent = nowU
		return r.pr.ev
	}
	if s.explore > 0 && !frozen {
		s.explore--
		return randomEV(r.rng, r.p.evs)
	}
	if s.valid != 0 {
		// Oldest valid first: rotate the valid bits so the oldest entry is bit 0.
		n, o := r.p.n, r.oldest()
		m := uint16(s.valid) | uint16(s.valid)<<n
		i := o + uint8(bits.TrailingZeros16(m>>o))
		if i >= n {
			i -= n
		}
		s.valid &^= 1 << i
		return s.evAt(i)
	}
	if frozen {
		if f := r.filled(); f > 0 {
			// Round robin over the cached entries, used or not.
			c := s.explore
			if c >= f {
				c = 0
			}
			s.explore = c + 1
			i := r.oldest() + c
			if i >= r.p.n {
				i -= r.p.n
			}
			return s.evAt(i)
		}
		// Nothing ever cached: no path is known good, so a random one is no worse.
	}
	return randomEV(r.rng, r.p.evs)
}

// forceFreeze enters freezing mode (once: an episode) and pushes its exit a freeze
// duration ahead at every packet, so it never ends (Config.ForceFreezeAt).
func (r *REPS) forceFreeze(nowU uint32) {
	s := &r.s
	if s.ctl&freezeBit == 0 {
		r.episodes++
		s.ctl |= freezeBit
		s.explore = 0
		r.pr.set = false // no loss: no path to probe
	}
	s.setTime(nowU + r.p.freezeU)
}

// expire leaves freezing mode once its exit time has passed.
func (r *REPS) expire(nowU uint32) {
	if r.s.ctl&freezeBit == 0 {
		return
	}
	if d := int32(nowU - r.s.time()); d >= 0 || d < -r.p.maxFreezeU {
		r.unfreeze(nowU)
	}
}

// unfreeze leaves freezing mode as the REPS paper and htsim do: the cached EVs may all
// lead into links that failed after the freeze began, so they are forgotten and a BDP
// of random EVs is explored. If the failure persists, the next loss judged a failure
// freezes again, on the EVs whose ACKs came back since (htsim waits for the end of the
// BDP; here the idle rule can restart the exploration of a connection whose ACKs are
// rare, which must not keep it from freezing).
func (r *REPS) unfreeze(nowU uint32) {
	s := &r.s
	s.ctl &= headMask // not freezing, nothing cached
	r.pr.set = false
	s.valid = 0
	s.explore = r.p.explore
	s.setTime(nowU)
	s.setRTT(0)
}

// noteRTT folds an RTT sample into the windowed maximum.
func (r *REPS) noteRTT(now, rtt int64) {
	if rtt <= 0 {
		return
	}
	s := &r.s
	v := uint16(min(rtt>>rttShift, 0xffff))
	if s.ctl&freezeBit == 0 {
		nowU := uint32(now >> tShift)
		if d := int32(nowU - s.time()); d < 0 || uint32(d) > r.p.windowU {
			s.setTime(nowU)
			s.setRTT(v)
			return
		}
	}
	if v > s.rtt() {
		s.setRTT(v)
	}
}

// push caches ev as the newest valid entry, overwriting the oldest when full.
func (r *REPS) push(ev uint16) {
	s := &r.s
	h := s.ctl & headMask
	s.setEV(h, ev)
	s.valid |= 1 << h
	f := r.filled()
	if f < r.p.n {
		f++
	}
	h++
	if h == r.p.n {
		h = 0
	}
	s.ctl = s.ctl&freezeBit | f<<filledShift | h
}

// expireAt leaves an expired freeze before feedback at time now is taken in.
func (r *REPS) expireAt(now int64) {
	if r.s.ctl&freezeBit != 0 {
		r.expire(uint32(now >> tShift))
	}
}

// OnAck recycles the EV of an unmarked ACK; a CE-marked one is dropped.
func (r *REPS) OnAck(now int64, ev uint16, ce bool, rtt int64) {
	r.expireAt(now)
	r.probeAnswered(now, ev, rtt)
	r.noteRTT(now, rtt)
	if !ce {
		r.push(ev)
	}
}

// OnCoalescedAck recycles every clean EV the ACK reports with Config.CleanEVs, else only
// the trigger's (the REPS paper's worst case).
func (r *REPS) OnCoalescedAck(now int64, trigger uint16, ce bool, clean []uint16, rtt int64) {
	if !r.p.cleanEVs {
		r.OnAck(now, trigger, ce, rtt)
		return
	}
	r.expireAt(now)
	r.probeAnswered(now, trigger, rtt)
	r.noteRTT(now, rtt)
	for _, ev := range clean {
		r.push(ev)
	}
}

// OnLoss enters freezing mode when the loss is judged a failure: with trimming any
// untrimmed loss; without, a loss while the recent max RTT was low. A loss while frozen
// does not prolong the freeze (unless Config.FreezeExtend): it ends FreezeDuration
// after it began. A lost probe is such a loss: probing only ends a freeze sooner, since
// a freeze held while probes fail can hold a connection on cached EVs that failed
// since (back-to-back failures), which only the timer's exploration escapes.
func (r *REPS) OnLoss(now int64, ev uint16, cause cc.LossCause) {
	if !r.p.freezing || cause == cc.LossTrim || (cause == cc.LossSack && !r.p.sackFails) {
		return
	}
	s := &r.s
	nowU := uint32(now >> tShift)
	r.expire(nowU)
	frozen := s.ctl&freezeBit != 0
	if frozen && !r.p.extend {
		return
	}
	if !r.p.trimming {
		recent := frozen
		if !frozen {
			d := int32(nowU - s.time())
			recent = d >= 0 && uint32(d) <= 2*r.p.windowU
		}
		if recent && s.rtt() >= r.p.failRTT {
			return // RTTs were high just before: congestion
		}
	}
	if !frozen {
		r.episodes++
		s.ctl |= freezeBit
		s.explore = 0
		if r.p.probe {
			r.pr = probeState{ev: ev, sent: nowU, set: true}
		}
	}
	s.setTime(nowU + r.p.freezeU)
}

// probeAnswered ends a freeze when an ACK answers a probe: it acknowledges a packet sent
// on the failed EV no earlier than the last probe (send time = now - rtt; a packet sent
// before the failure proves nothing), so that path carries packets again.
func (r *REPS) probeAnswered(now int64, ev uint16, rtt int64) {
	if !r.pr.set || ev != r.pr.ev || rtt <= 0 || r.s.ctl&freezeBit == 0 {
		return
	}
	if int32(uint32((now-rtt)>>tShift)-r.pr.sent) >= 0 {
		r.unfreeze(uint32(now >> tShift))
	}
}

// Freezing reports whether REPS is in freezing mode at time now.
func (r *REPS) Freezing(now int64) bool {
	if r.s.ctl&freezeBit == 0 {
		return false
	}
	d := int32(uint32(now>>tShift) - r.s.time())
	return d < 0 && d >= -r.p.maxFreezeU
}

// FreezeEpisodes counts the times freezing mode was entered.
func (r *REPS) FreezeEpisodes() uint64 { return r.episodes }

// Cost reports the packed state (StateBytes) and the operation count of one send plus
// one ACK decision.
func (r *REPS) Cost() hwprofile.Cost {
	c := hwprofile.Cost{Name: "reps", StateBytes: StateBytes(int(r.p.n)),
		GlobalBytes: 16, Ops: 30, IntegerOnly: true}
	if r.p.probe {
		c.StateBytes += 6 // probeState: the failed EV and the last probe's time
		c.Ops += 6
	}
	return c
}
