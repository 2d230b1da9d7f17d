package multipath

import (
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/transport"
)

// aimd is a small ECN-reacting window controller (DCTCP-like: additive increase per
// ACK, a halving step per marked ACK), standing in for a real controller to check that
// the comparisons do not hinge on the fixed window.
type aimd struct{ w, mtu int }

func (a *aimd) OnAck(k cc.Ack) {
	if k.CE {
		a.w = max(a.w-a.mtu/2, a.mtu)
	} else {
		a.w += a.mtu * a.mtu * k.Packets / a.w
	}
}
func (a *aimd) OnLoss(l cc.Loss) { a.w = max(a.w-a.mtu, a.mtu) }
func (a *aimd) Window() int      { return a.w }
func (a *aimd) PacingRate() int64 {
	return 0
}

func withAIMD(s Scenario) Scenario {
	s.Hooks = func(c transport.Config) transport.Hooks {
		mtu := c.MTU
		return transport.Hooks{NewCC: func() cc.Controller { return &aimd{w: 25 * mtu, mtu: mtu} }}
	}
	return s
}

func TestComparisonsUnderAnECNController(t *testing.T) {
	for _, trim := range []bool{true, false} {
		rs, os := run(t, withAIMD(slowPath("reps", "", trim))), run(t, withAIMD(slowPath("ops", "", trim)))
		rd, od := run(t, withAIMD(deadPath("reps", "", trim))), run(t, withAIMD(deadPath("ops", "", trim)))
		t.Logf("trim %v: slow: reps %d pkts (%.1f %%) %d us, ops %d (%.1f %%) %d us; dead: reps %d (froze %d) %d us, ops %d %d us",
			trim, rs.SlowPackets, 100*float64(rs.SlowPackets)/float64(total(rs)), rs.FCT/1000,
			os.SlowPackets, 100*float64(os.SlowPackets)/float64(total(os)), os.FCT/1000,
			rd.DeadAfterFail, rd.FreezeEpisodes, rd.FCT/1000, od.DeadAfterFail, od.FCT/1000)
		if !rs.Done || !os.Done || !rd.Done || !od.Done {
			t.Fatal("incomplete")
		}
		if float64(rs.SlowPackets) > 0.85*float64(os.SlowPackets) || float64(rs.FCT) > 0.95*float64(os.FCT) {
			t.Errorf("trim %v: slow path: REPS does not beat OPS", trim)
		}
		if rd.FreezeEpisodes == 0 || 10*rd.DeadAfterFail > od.DeadAfterFail {
			t.Errorf("trim %v: dead path: REPS does not beat OPS tenfold", trim)
		}
	}
}
