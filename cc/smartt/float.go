package smartt

import (
	"unsafe"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/hwprofile"
)

// floatState is the per-flow state of the float implementation (40 bytes).
type floatState struct {
	core
	cwnd float64 // bytes
	avg  float64 // Wait-To-Decrease EWMA of CE marks, 0..1
}

// Float is SMaRTT in float64 arithmetic: the reference implementation.
type Float struct {
	p  *Params
	s  floatState
	st Stats
}

// NewFloat returns a float-arithmetic controller for one flow.
func NewFloat(p *Params) *Float {
	return &Float{p: p, s: floatState{cwnd: float64(p.InitWin)}}
}

// Window returns the congestion window in bytes.
func (f *Float) Window() int { return int(f.s.cwnd) }

// Cwnd returns the exact window (for tests comparing implementations).
func (f *Float) Cwnd() float64 { return f.s.cwnd }

// PacingRate returns 0: SMaRTT is window-based.
func (f *Float) PacingRate() int64 { return 0 }

// Stats returns the controller's counters.
func (f *Float) Stats() Stats { return f.st }

// SetHops selects the base RTT by path length (Config.BaseRTTPerHop).
func (f *Float) SetHops(n int) { f.s.SetHops(n) }

// Cost reports the float implementation's footprint; it is not integer-only.
func (f *Float) Cost() hwprofile.Cost {
	return hwprofile.Cost{Name: "smartt", StateBytes: int(unsafe.Sizeof(floatState{})),
		GlobalBytes: globalBytes, Ops: opsPerAck, IntegerOnly: false}
}

// OnAck runs Algorithm 1 for one ACK.
func (f *Float) OnAck(a cc.Ack) {
	p, s := f.p, &f.s
	size, react := s.batch(p, clampSize(a.Bytes), uint32(s.cwnd))
	if !react {
		return
	}
	f.st.Acks++
	if s.account(size) {
		f.st.Ignored++
		return
	}
	brtt, trtt := s.rtts(p, a.RTT)
	if p.Signals != sigBoth {
		f.oneSignal(a, float64(size), trtt)
		return
	}
	canDecrease := f.wtd(a.CE)
	if f.quickAdapt(a.Now, trtt, a.InFlight) {
		f.clamp()
		return
	}
	rtt := a.RTT
	if rtt <= 0 {
		return // no RTT sample: no quadrant to choose
	}
	if s.fastIncrease(p, &f.st, size, rtt, brtt, a.CE, uint32(s.cwnd)) {
		s.cwnd += float64(p.K * p.MTU)
		f.clamp()
		return
	}
	sz := float64(size)
	before := s.cwnd
	switch {
	case a.CE && !canDecrease:
		f.st.WTDHeld++
		return
	case a.CE && rtt <= trtt:
		f.st.FairDecrease++
		s.cwnd -= s.cwnd / float64(p.BDP) * p.FD * sz
	case a.CE:
		f.st.MultDecrease++
		s.cwnd -= min(sz, float64(rtt-trtt)/float64(rtt)*p.MD*sz)
		s.cwnd -= s.cwnd / float64(p.BDP) * p.FD * sz
	case rtt > trtt:
		f.st.FairIncrease++
		s.cwnd += sz / s.cwnd * float64(p.MTU) * p.FI
	default:
		f.st.MultIncrease++
		s.cwnd += min(sz, float64(trtt-rtt)/float64(rtt)*sz/s.cwnd*float64(p.MTU)*p.MI)
		s.cwnd += sz / s.cwnd * float64(p.MTU) * p.FI
	}
	if p.CapDec {
		s.cwnd = max(s.cwnd, before-float64(p.MTU)) // MD+FD at most one MTU per ACK
	}
	f.clamp()
}

// OnLoss cuts the window by the lost packet's size and arms QuickAdapt (Algorithm 1,
// lines 28-34), for the causes lossCuts accepts.
func (f *Float) OnLoss(l cc.Loss) {
	s := &f.s
	size, cut := s.loss(f.p, &f.st, l)
	if !cut {
		return
	}
	s.cwnd -= float64(size)
	if s.ignore == 0 {
		_, trtt := s.rtts(f.p, 0)
		f.quickAdapt(l.Now, trtt, l.InFlight)
	}
	f.clamp()
}

// wtd updates the EWMA of CE marks and reports whether a decrease is allowed.
func (f *Float) wtd(ce bool) bool {
	p, s := f.p, &f.s
	e := 0.0
	if ce {
		e = 1
	}
	s.avg = p.Alpha*e + (1-p.Alpha)*s.avg
	return p.NoWTD || s.avg >= p.Threshold
}

// quickAdapt is Algorithm 2 (core.quickAdapt): when it fires, the window becomes the
// bytes acknowledged in the last target RTT times qa_scaling.
func (f *Float) quickAdapt(now, trtt int64, inflight int) bool {
	acked, fire := f.s.quickAdapt(f.p, &f.st, now, trtt, inflight)
	if fire {
		f.s.cwnd = float64(acked) * f.p.QAScaling
	}
	return fire
}

func (f *Float) clamp() {
	p, s := f.p, &f.s
	if s.cwnd <= float64(p.MinWindow) {
		if s.cwnd < float64(p.MinWindow) {
			f.st.ClampMin++
		}
		s.cwnd = float64(p.MinWindow)
	} else if s.cwnd >= float64(p.MaxWindow) {
		if s.cwnd > float64(p.MaxWindow) {
			f.st.ClampMax++
		}
		s.cwnd = float64(p.MaxWindow)
	}
}

// CCStats reports the counters the engine shows per connection (cc.StatsReporter).
func (f *Float) CCStats() cc.Stats {
	return cc.Stats{QuickAdapts: f.st.QuickAdapt, Cuts: f.st.MultDecrease + f.st.FairDecrease}
}

// oneSignal is the single-signal window controller of the SMaRTT paper's Fig. 2 (Signals
// ecn or delay): a decrease of at most half the ACK's bytes on the signal, else the fair
// increase.
func (f *Float) oneSignal(a cc.Ack, sz float64, trtt int64) {
	s, p := &f.s, f.p
	switch {
	case p.Signals == sigECN && a.CE:
		f.st.FairDecrease++
		s.cwnd -= sz / 2
	case p.Signals == sigDelay && a.RTT > trtt:
		f.st.MultDecrease++
		s.cwnd -= sz / 2 * float64(a.RTT-trtt) / float64(a.RTT)
	default:
		f.st.FairIncrease++
		s.cwnd += sz / s.cwnd * float64(p.MTU) * p.FI
	}
	f.clamp()
}
