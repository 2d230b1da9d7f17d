package smartt

import (
	"unsafe"

	"smartt/cc"
	"smartt/hwprofile"
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
	canDecrease := f.wtd(a.CE)
	if f.quickAdapt(a.Now, trtt, a.InFlight) {
		f.clamp()
		return
	}
	rtt := a.RTT
	if rtt <= 0 {
		return // no RTT sample: no quadrant to choose
	}
	if f.fastIncrease(size, rtt, brtt, a.CE) {
		f.clamp()
		return
	}
	sz := float64(size)
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
	f.clamp()
}

// OnLoss cuts the window by the lost packet's size and arms QuickAdapt (Algorithm 1,
// lines 28-34), for the causes lossCuts accepts.
func (f *Float) OnLoss(l cc.Loss) {
	p, s := f.p, &f.s
	size := clampSize(l.Bytes)
	if !lossCuts(p, l.Cause) {
		f.st.LossNotCut++
		return
	}
	f.countLoss(l.Cause)
	// The lost packet's feedback has arrived: it counts toward the ignored bytes
	// (Algorithm 1 adds every packet's size before branching); it was not delivered,
	// so it does not count as acknowledged.
	s.ignore -= min(s.ignore, size)
	s.cwnd -= float64(size)
	s.fi |= flagTrigger
	if s.ignore == 0 {
		_, trtt := s.rtts(p, 0)
		f.quickAdapt(l.Now, trtt, l.InFlight)
	}
	f.clamp()
}

func (f *Float) countLoss(c cc.LossCause) {
	switch c {
	case cc.LossTrim:
		f.st.LossTrim++
	case cc.LossTimeout:
		f.st.LossTimeout++
	default:
		f.st.LossSack++
	}
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

// quickAdapt is Algorithm 2: at most once per target RTT, if armed, set the window to
// the bytes acknowledged in the last target RTT times qa_scaling and ignore the
// feedback of the bytes now in flight.
func (f *Float) quickAdapt(now, trtt int64, inflight int) bool {
	p, s := f.p, &f.s
	if !s.qaDue(now, trtt) {
		return false
	}
	adapted := false
	if s.fi&(flagTrigger|flagStarted) == flagTrigger|flagStarted {
		s.fi &^= flagTrigger
		if !p.NoQA {
			adapted = true
			f.st.QuickAdapt++
			s.cwnd = float64(max(s.acked, uint32(p.MTU))) * p.QAScaling
			s.ignore = uint32(min(max(inflight, 0), 1<<32-1))
		}
	}
	s.qaEnd = uint32(now + trtt)
	s.fi |= flagStarted
	s.acked = 0
	return adapted
}

// fastIncrease is Algorithm 3: after a window's worth of bytes at (about) the base RTT
// without CE, add k MTUs per ACK until a congested ACK.
func (f *Float) fastIncrease(size uint32, rtt, brtt int64, ce bool) bool {
	p, s := f.p, &f.s
	if p.NoFI {
		return false
	}
	if !ce && rtt <= brtt+p.FITol {
		n := min(s.fi&fiCountMask+size, fiCountMask)
		s.fi = s.fi&^fiCountMask | n
		if float64(n) > s.cwnd || s.fi&flagFIActive != 0 {
			if s.fi&flagFIActive == 0 {
				f.st.FastIncrease++
			}
			f.st.FastIncreaseAcks++
			s.fi |= flagFIActive
			s.cwnd += float64(p.K * p.MTU)
			return true
		}
		return false
	}
	s.fi &^= fiCountMask | flagFIActive
	return false
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
