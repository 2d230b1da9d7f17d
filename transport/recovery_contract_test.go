package transport

import (
	"slices"
	"testing"
)

// TestRecoveryContract holds every registered loss-recovery mode to what the core relies
// on: it is listed once in RecoveryModes and validates; its SACK-gap threshold is
// positive; a recoverer's per-connection state is set up by newConn; and a transfer
// that loses first transmissions completes byte-exact with every loss resent (by the
// mode's rule, a NACK, parity or a timeout). A new mode gets all of this by registering.
func TestRecoveryContract(t *testing.T) {
	if len(recoveryRegistry) != len(RecoveryModes) || len(RecoveryModes) < 5 {
		t.Fatalf("%d registered, %d listed: %q", len(recoveryRegistry), len(RecoveryModes), RecoveryModes)
	}
	for _, m := range RecoveryModes {
		if n := len(slices.DeleteFunc(slices.Clone(RecoveryModes), func(s string) bool { return s != m })); n != 1 {
			t.Errorf("mode %q listed %d times", m, n)
		}
		t.Run(m, func(t *testing.T) { recoveryContract(t, m) })
	}
}

func recoveryContract(t *testing.T, mode string) {
	cfg := DefaultConfig()
	cfg.Recovery.Mode = mode
	cfg.CC = "fixed"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	rm, thr, nsub := cfg.recoveryParams()
	if rm == nil || rm.name != mode || thr < 1 || nsub < 1 {
		t.Fatalf("mode %v, threshold %d, %d subflows", rm, thr, nsub)
	}
	p := newPair(t, cfg, 5000)
	if p.a.rthr != thr {
		t.Errorf("endpoint threshold %d, config %d", p.a.rthr, thr)
	}
	sent := dropFirstTx(p, 37)
	msgs := [][]byte{patterned(300<<10, 1), patterned(5000, 2), patterned(64<<10, 3)}
	recoveryRun(t, p, msgs)
	n := *sent
	s := p.a.Stats()
	if lost := uint64(n / 37); lost == 0 || s.RetxSack+s.RetxNack+s.RetxTimeout+p.b.Stats().ECRebuilt < lost {
		t.Errorf("%d first transmissions lost, %d+%d+%d resent and %d rebuilt", lost, s.RetxSack, s.RetxNack, s.RetxTimeout, p.b.Stats().ECRebuilt)
	}
	for _, c := range p.a.list {
		if rec, ok := p.a.rec.(subflowRecovery); ok && len(c.sub) != rec.n {
			t.Errorf("connection has %d subflows, want %d", len(c.sub), rec.n)
		}
		if _, ok := p.a.rec.(*ecRecovery); ok != (c.ecTx != nil) {
			t.Errorf("ec coder on the connection: %v, mode ec: %v", c.ecTx != nil, ok)
		}
	}
}

// dropFirstTx makes p lose every nth first transmission of a data packet from a; the
// count it returns is of the first transmissions sent.
func dropFirstTx(p *pair, nth int) *int {
	n := new(int)
	p.drop = func(from *Endpoint, b []byte) bool {
		_, _, retx, ok := dataPSN(b)
		if !ok || from != p.a || retx {
			return false
		}
		*n++
		return *n%nth == 0
	}
	return n
}
