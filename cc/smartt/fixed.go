package smartt

import (
	"math/bits"
	"unsafe"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/hwprofile"
)

// fixedState is the packed per-flow state of the integer implementation: 32 bytes.
type fixedState struct {
	core
	cwnd uint32 // window, bytes in Q24.8 (at most 16 MiB)
	avg  uint32 // Wait-To-Decrease EWMA of CE marks, Q1.31 (1.0 = 1<<31)
}

// Fixed is SMaRTT in integer arithmetic only: windows in Q24.8 bytes, gains in Q32,
// the EWMA in Q1.31, 128-bit intermediate products. It makes the decisions of Float
// within rounding.
type Fixed struct {
	p  *Params
	s  fixedState
	st Stats
}

// NewFixed returns an integer-arithmetic controller for one flow.
func NewFixed(p *Params) *Fixed {
	return &Fixed{p: p, s: fixedState{cwnd: p.fixed.initQ8}}
}

// Window returns the congestion window in bytes.
func (f *Fixed) Window() int { return int(f.s.cwnd >> 8) }

// Cwnd returns the exact window in bytes (for tests comparing implementations).
func (f *Fixed) Cwnd() float64 { return float64(f.s.cwnd) / 256 }

// PacingRate returns 0: SMaRTT is window-based.
func (f *Fixed) PacingRate() int64 { return 0 }

// Stats returns the controller's counters.
func (f *Fixed) Stats() Stats { return f.st }

// SetHops selects the base RTT by path length (Config.BaseRTTPerHop).
func (f *Fixed) SetHops(n int) { f.s.SetHops(n) }

// Cost reports the packed state, the shared constants and the operation count.
func (f *Fixed) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "smartt-fixed", StateBytes: int(unsafe.Sizeof(fixedState{})),
		GlobalBytes: globalBytes, Ops: opsPerAck, IntegerOnly: true}
}

// globalBytes is the shared constant set a NIC would hold for all flows: mtu (2), bdp
// (4), base RTT (4), target RTT or ratio (4), fd, md, fi, mi, qa_scaling, alpha (Q32 in
// 8 bytes each: 48), threshold (4), k x mtu (4), min/max window (8), FastIncrease
// tolerance (4), react_every and flags (2).
const globalBytes = 2 + 4 + 4 + 4 + 6*8 + 4 + 4 + 8 + 4 + 2

// opsPerAck is the worst-case operation count of one ACK (the MD+FD or MI+FI path
// with a QuickAdapt check, WTD and FastIncrease), counted on the code below: about 20
// loads/stores, 25 add/sub/shift/logic, 8 compares/branches, 6 multiplications and 4
// divisions.
const opsPerAck = 63

// mulDiv returns round(a*b/c) with a 128-bit intermediate; it saturates instead of
// overflowing.
func mulDiv(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	var carry uint64
	lo, carry = bits.Add64(lo, c>>1, 0)
	hi += carry
	if hi >= c {
		return ^uint64(0)
	}
	q, _ := bits.Div64(hi, lo, c)
	return q
}

// OnAck runs Algorithm 1 for one ACK.
func (f *Fixed) OnAck(a cc.Ack) {
	p, s := f.p, &f.s
	size, react := s.batch(p, clampSize(a.Bytes), s.cwnd>>8)
	if !react {
		return
	}
	f.st.Acks++
	if s.account(size) {
		f.st.Ignored++
		return
	}
	brtt, trtt := s.rtts(p, a.RTT)
	canDecrease := f.wtd(a.CE)
	if f.quickAdapt(a.Now, trtt, a.InFlight) {
		f.clamp(uint64(s.cwnd))
		return
	}
	rtt := a.RTT
	if rtt <= 0 {
		return
	}
	if s.fastIncrease(p, &f.st, size, rtt, brtt, a.CE, s.cwnd>>8) {
		f.clamp(uint64(s.cwnd) + uint64(p.fixed.kQ8))
		return
	}
	rtt = min(rtt, 1<<32-1) // 32-bit RTTs: no product below overflows
	fp := &p.fixed
	sz := uint64(size)
	cw := uint64(s.cwnd) // Q8
	before := cw
	switch {
	case a.CE && !canDecrease:
		f.st.WTDHeld++
		return
	case a.CE && rtt <= trtt:
		f.st.FairDecrease++
		cw = subSat(cw, mulDiv(cw*sz, fp.fdQ32, uint64(p.BDP)<<32))
	case a.CE:
		f.st.MultDecrease++
		d := uint64(rtt - trtt)
		cw = subSat(cw, min(sz<<8, mulDiv(d*sz, fp.mdQ32, uint64(rtt)<<24)))
		cw = subSat(cw, mulDiv(cw*sz, fp.fdQ32, uint64(p.BDP)<<32))
	case rtt > trtt:
		f.st.FairIncrease++
		cw += f.fairInc(sz, cw)
	default:
		f.st.MultIncrease++
		x := mulDiv(sz*uint64(p.MTU), fp.miQ32, max(cw, 1)<<16)
		cw += min(sz<<8, mulDiv(x, uint64(trtt-rtt), uint64(rtt)))
		cw += f.fairInc(sz, cw)
	}
	if p.CapDec {
		cw = max(cw, subSat(before, uint64(p.MTU)<<8)) // MD+FD at most one MTU per ACK
	}
	f.clamp(cw)
}

// fairInc is equation (3) in Q8: size / cwnd * mtu * fi.
func (f *Fixed) fairInc(sz, cw uint64) uint64 {
	return mulDiv(sz*uint64(f.p.MTU), f.p.fixed.fiQ32, max(cw, 1)<<16)
}

func subSat(a, b uint64) uint64 {
	if b >= a {
		return 0
	}
	return a - b
}

// OnLoss cuts the window by the lost packet's size and arms QuickAdapt (see Float.OnLoss).
func (f *Fixed) OnLoss(l cc.Loss) {
	s := &f.s
	size, cut := s.loss(f.p, &f.st, l)
	if !cut {
		return
	}
	s.cwnd = uint32(subSat(uint64(s.cwnd), uint64(size)<<8))
	if s.ignore == 0 {
		_, trtt := s.rtts(f.p, 0)
		f.quickAdapt(l.Now, trtt, l.InFlight)
	}
	f.clamp(uint64(s.cwnd))
}

// wtd updates the EWMA of CE marks (Q1.31) and reports whether a decrease is allowed.
func (f *Fixed) wtd(ce bool) bool {
	p, s := f.p, &f.s
	var e int64
	if ce {
		e = 1 << 31
	}
	// avg += alpha*(e-avg): |e-avg| <= 2^31 and alpha <= 2^32, so the product fits.
	s.avg = uint32(int64(s.avg) + (e-int64(s.avg))*p.fixed.alphaQ32>>32)
	return p.NoWTD || s.avg >= p.fixed.thrQ31
}

// quickAdapt is Algorithm 2 (core.quickAdapt): when it fires, the window becomes the
// bytes acknowledged in the last target RTT times qa_scaling.
func (f *Fixed) quickAdapt(now, trtt int64, inflight int) bool {
	acked, fire := f.s.quickAdapt(f.p, &f.st, now, trtt, inflight)
	if fire {
		w := mulDiv(uint64(acked), f.p.fixed.qaQ32, 1<<24)
		f.s.cwnd = uint32(min(w, uint64(f.p.fixed.maxQ8)+1)) // clamp follows
	}
	return fire
}

// clamp stores cw (Q8) bounded to [min_window, max_window].
func (f *Fixed) clamp(cw uint64) {
	fp := &f.p.fixed
	switch {
	case cw < uint64(fp.minQ8):
		f.st.ClampMin++
		cw = uint64(fp.minQ8)
	case cw > uint64(fp.maxQ8):
		f.st.ClampMax++
		cw = uint64(fp.maxQ8)
	}
	f.s.cwnd = uint32(cw)
}

// CCStats reports the counters the engine shows per connection (cc.StatsReporter).
func (f *Fixed) CCStats() cc.Stats {
	return cc.Stats{QuickAdapts: f.st.QuickAdapt, Cuts: f.st.MultDecrease + f.st.FairDecrease}
}
