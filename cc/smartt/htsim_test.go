package smartt

import (
	"math"
	"testing"

	"github.com/smartt-transport/smartt/cc"
)

// TestNoTimeoutCut: by default a timeout cuts the window by the lost packet (Algorithm
// 1); with NoTimeoutCut (the REPS artifact's htsim) it leaves the window alone, while a
// trim still cuts.
func TestNoTimeoutCut(t *testing.T) {
	for _, noCut := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.NoTimeoutCut = noCut
		for _, c := range newBoth(t, cfg, refNet, true) {
			set(c, 100_000, 0)
			c.OnLoss(cc.Loss{Now: 1, Bytes: 4096, Cause: cc.LossTimeout, InFlight: 50_000})
			want := 100_000.0 - 4096
			if noCut {
				want = 100_000
			}
			if got := c.Cwnd(); math.Abs(got-want) > tol(c) {
				t.Errorf("no_timeout_cut=%v %s: after a timeout cwnd = %.1f, want %.1f", noCut, name(c), got, want)
			}
			set(c, 100_000, 0)
			c.OnLoss(cc.Loss{Now: 2, Bytes: 4096, Cause: cc.LossTrim, InFlight: 50_000})
			if got := c.Cwnd(); got >= 100_000 {
				t.Errorf("no_timeout_cut=%v %s: a trim did not cut (cwnd %.1f)", noCut, name(c), got)
			}
		}
	}
}

// TestCapDecrease: a CE-marked ACK far above the target RTT takes MD (capped at the
// ACK's 4096 bytes) and then FD (about 0.67 x 0.8 x 4096 more at this window); with
// CapDecrease the two together take at most one MTU.
func TestCapDecrease(t *testing.T) {
	for _, capped := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.CapDecrease = capped
		for _, c := range newBoth(t, cfg, refNet, true) {
			set(c, 100_000, 1)
			c.OnAck(ack(1, 4096, 100_000, true)) // RTT 100 us >> target 18 us
			cut := 100_000 - c.Cwnd()
			if s := c.Stats(); s.MultDecrease != 1 {
				t.Fatalf("%s: %+v, want one MD", name(c), s)
			}
			uncapped := 4096 + (100_000-4096)/150_000.0*0.8*4096
			want := uncapped
			if capped {
				want = mtu
			}
			if math.Abs(cut-want) > 2*tol(c)+1 {
				t.Errorf("cap_decrease=%v %s: cut %.1f bytes, want %.1f", capped, name(c), cut, want)
			}
		}
	}
}

// TestLowerBaseRTT: with LowerBaseRTT the configured 12 us base RTT is never raised (a
// first sample of 30 us leaves the 18 us target) and is lowered by an 8 us sample (target
// 12 us), so a 15 us RTT is then above target (FI); without it 15 us is below (MI).
func TestLowerBaseRTT(t *testing.T) {
	for _, lower := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.LowerBaseRTT = lower
		cfg.DisableFastIncrease = true
		for _, c := range newBoth(t, cfg, refNet, true) {
			set(c, 100_000, 0)
			for i, rtt := range []int64{30_000, 8_000, 15_000} {
				c.OnAck(ack(int64(i), 4096, rtt, false))
			}
			s := c.Stats()
			wantFI, wantMI := uint64(1), uint64(2)
			if lower {
				wantFI, wantMI = 2, 1
			}
			if s.FairIncrease != wantFI || s.MultIncrease != wantMI {
				t.Errorf("lower_base_rtt=%v %s: FI %d, MI %d; want %d, %d", lower, name(c), s.FairIncrease, s.MultIncrease, wantFI, wantMI)
			}
		}
	}
}

// TestREPSArtifactConfig: the artifact's constants are valid and reach the parameters.
func TestREPSArtifactConfig(t *testing.T) {
	p, err := NewParams(REPSArtifactConfig(), refNet, true)
	if err != nil {
		t.Fatal(err)
	}
	if p.K != 1 || p.FITol != 1000 || p.MI != 2 || p.FI != 0.02 || p.FD != 0.5 || p.MD != 1 ||
		p.Alpha != 0.05 || p.Threshold != 0.3 || !p.NoTOCut || !p.CapDec || !p.Lower {
		t.Fatalf("params %+v", p)
	}
}
