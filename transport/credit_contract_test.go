package transport

import (
	"slices"
	"testing"
)

// TestCreditContract holds every registered receiver-driven credit mechanism, and every
// controller naming one, to what the core relies on: each controller's mechanism is
// registered and each mechanism is named by a controller; an endpoint running such a
// controller has the receiver half and each of its connections a credit gate; a
// transfer that loses first transmissions completes byte-exact, paced by PULLs that the
// sender accepts, and leaves the receiver half idle. A sender-driven endpoint has
// neither half and counts a PULL sent to it as bad. A new mechanism gets all of this
// by registering.
func TestCreditContract(t *testing.T) {
	var named []string
	for _, name := range CCNames() {
		r, _ := LookupCC(name)
		if r.Credit == "" {
			continue
		}
		if _, ok := creditRegistry[r.Credit]; !ok {
			t.Errorf("cc %q names credit mechanism %q, which is not registered", name, r.Credit)
			continue
		}
		named = append(named, r.Credit)
		t.Run(name, func(t *testing.T) { creditContract(t, name) })
	}
	if len(creditRegistry) == 0 {
		t.Fatal("no credit mechanism registered")
	}
	for m := range creditRegistry {
		if !slices.Contains(named, m) {
			t.Errorf("credit mechanism %q is named by no controller", m)
		}
	}
	t.Run("sender-driven", creditAbsent)
}

func creditContract(t *testing.T, ccName string) {
	cfg := DefaultConfig()
	cfg.CC = ccName
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p := newPair(t, cfg, 5000)
	if p.a.pull == nil || p.b.pull == nil {
		t.Fatalf("endpoints without the receiver half: %v, %v", p.a.pull, p.b.pull)
	}
	sent := dropFirstTx(p, 37)
	recoveryRun(t, p, [][]byte{patterned(600<<10, 1), patterned(5000, 2), patterned(64<<10, 3)})
	for _, e := range []*Endpoint{p.a, p.b} {
		for _, c := range e.list {
			if c.credit == nil {
				t.Errorf("a connection of a %s endpoint has no credit gate", ccName)
			}
		}
	}
	n, sa, sb := *sent, p.a.Stats(), p.b.Stats()
	if n < 37 || sb.PullsSent == 0 || sa.PullsRecv == 0 || sa.BadPulls != 0 {
		t.Errorf("%d data packets, %d lost: PULLs sent %d, received %d, %d bad", n, n/37, sb.PullsSent, sa.PullsRecv, sa.BadPulls)
	}
	if d, ok := p.b.pull.deadline(); ok {
		t.Errorf("receiver half still has a PULL due at %d after the transfer", d)
	}
}

func creditAbsent(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CC = "fixed"
	p := newPair(t, cfg, 3000)
	if p.a.pull != nil {
		t.Fatalf("sender-driven endpoint has a receiver half %T", p.a.pull)
	}
	if _, ok := p.a.pullDeadline(); ok {
		t.Fatal("sender-driven endpoint has a PULL deadline")
	}
	recoveryRun(t, p, [][]byte{patterned(5000, 1)})
	c := p.a.list[0]
	if c.credit != nil {
		t.Fatal("sender-driven connection has a credit gate")
	}
	p.a.HandlePacket(p.now, pullTo(t, c.id, c.peerID, 1), RxMeta{From: p.bAddr})
	if s := p.a.Stats(); s.PullsRecv != 1 || s.BadPulls != 1 {
		t.Fatalf("PULL to a sender-driven connection: %d received, %d bad", s.PullsRecv, s.BadPulls)
	}
}
