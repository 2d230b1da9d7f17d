package transport

import (
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport/seal"
	"github.com/smartt-transport/smartt/transport/wire"
)

func TestRecoveryConfig(t *testing.T) {
	cfg := DefaultConfig()
	if n := cfg.SubflowCount(); n != 11 {
		t.Errorf("Eq. 1 with h=4, Q=32 KiB, s=4 KiB, f=1, t=3: %d subflows, want 11 (the paper's figure)", n)
	}
	cfg.Recovery.DupThresh = 6
	if n := cfg.SubflowCount(); n != 6 {
		t.Errorf("Eq. 1 with t=6: %d subflows, want 6", n)
	}
	cfg.Recovery.FlowsPerHost = 127
	if n := cfg.SubflowCount(); n != 1 {
		t.Errorf("Eq. 1 with 127 flows per host: %d subflows, want 1", n)
	}
	cfg.Recovery.Subflows = 5
	if n := cfg.SubflowCount(); n != 5 {
		t.Errorf("explicit subflows: %d, want 5", n)
	}
	cfg = DefaultConfig()
	if k, m := cfg.ECBlock(); k != 20 || m != 1 {
		t.Errorf("EC block from 5 %% overhead: k=%d m=%d, want 20+1", k, m)
	}
	for _, c := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.Recovery.Mode = "tcp" }, "recovery.mode"},
		{func(c *Config) { c.Recovery.DupThresh = -1 }, "recovery.dup_thresh"},
		{func(c *Config) { c.Recovery.Subflows = MaxSubflows + 1 }, "recovery.subflows"},
		{func(c *Config) { c.Recovery.M = MaxECParity + 1 }, "recovery.m"},
		{func(c *Config) { c.Recovery.K = 300 }, "recovery.k"},
		{func(c *Config) { c.Recovery.Overhead = 2 }, "recovery.overhead"},
	} {
		cfg := DefaultConfig()
		c.set(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v", c.want, err)
		}
	}
	for _, m := range RecoveryModes {
		cfg := DefaultConfig()
		cfg.Recovery.Mode = m
		if err := cfg.Validate(); err != nil {
			t.Errorf("mode %s: %v", m, err)
		}
	}
}

// dataPSN returns the PSN and EV of a DATA datagram (ok false for anything else).
func dataPSN(b []byte) (psn uint32, ev uint16, retx bool, ok bool) {
	var p wire.Packet
	if p.Decode(b) != nil || p.Type != wire.TypeData {
		return 0, 0, false, false
	}
	return p.Data.PSN, p.EV, p.Flags&wire.FlagRetx != 0, true
}

// recoveryRun sends msgs from a to b over p and checks that each arrives once, whole
// and byte-exact, in order, and is reported sent.
func recoveryRun(t *testing.T, p *pair, msgs [][]byte) {
	t.Helper()
	var id ConnID
	if cs := p.a.Conns(nil); len(cs) > 0 {
		id = cs[0].ID // warmed up (ecWarm): its peer is proven
	} else {
		var err error
		if id, err = p.a.Dial(0, p.bAddr); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range msgs {
		if _, err := p.a.Send(p.now, id, m); err != nil {
			t.Fatal(err)
		}
	}
	var l msgLog
	p.runUntil(t, p.now+5e10, func() bool {
		l.poll(t, p)
		return len(l.got) >= len(msgs) && len(l.sent) == len(msgs)
	})
	l.delivered(t, msgs)
}

func patterned(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + seed*13 + i>>9)
	}
	return b
}

// serializer is a sender's link: datagrams leave 10 ns apart in order, so that an extra
// delay of d x 10 ns + 5 holds a packet back behind exactly d later ones.
type serializer struct{ free int64 }

func (s *serializer) at(now int64) int64 {
	s.free = max(s.free, now) + 10
	return s.free - now
}

// TestRecoveryDupAckThreshold: under "dupack" a packet held back behind fewer later
// arrivals than the threshold costs nothing, one held back behind the threshold's count
// is resent (a spurious fast retransmission), and a lost one is resent by the dupACK rule,
// not by a timeout.
func TestRecoveryDupAckThreshold(t *testing.T) {
	for _, c := range []struct {
		depth, lose int
		retx        uint64
	}{{2, 0, 0}, {3, 0, 1}, {0, 1, 1}} {
		cfg := DefaultConfig()
		cfg.Recovery.Mode = RecoveryDupAck
		cfg.CC = "fixed"
		p := newPair(t, cfg, 5000)
		var ser serializer
		first := uint32(0)
		seen := 0
		p.extra = func(from *Endpoint, b []byte) int64 {
			x := ser.at(p.now)
			psn, _, retx, ok := dataPSN(b)
			if !ok || from != p.a || retx {
				return x
			}
			if seen == 0 {
				first = psn
			}
			seen++
			if psn == first+10 && c.depth > 0 {
				return x + int64(c.depth)*10 + 5
			}
			return x
		}
		p.drop = func(from *Endpoint, b []byte) bool {
			psn, _, retx, ok := dataPSN(b)
			return c.lose > 0 && ok && from == p.a && !retx && seen > 0 && psn == first+10
		}
		recoveryRun(t, p, [][]byte{patterned(200<<10, 1)})
		s := p.a.Stats()
		if s.RetxSack != c.retx || s.RetxTimeout != 0 {
			t.Errorf("depth %d, lose %d: %d dupACK and %d timeout retransmissions, want %d and 0", c.depth, c.lose, s.RetxSack, s.RetxTimeout, c.retx)
		}
	}
}

// paths is a network of n paths (path = EV mod n) whose delays differ by step ns each:
// per-packet spraying over it reorders heavily, each path stays FIFO.
func pathsDelay(p *pair, n int, step int64) func(from *Endpoint, b []byte) int64 {
	var ser serializer
	return func(from *Endpoint, b []byte) int64 {
		x := ser.at(p.now)
		if _, ev, _, ok := dataPSN(b); ok {
			return x + int64(int(ev)%n)*step
		}
		return x
	}
}

// TestRecoverySubflowsReorderingSafe: over 8 paths of very different delays with
// per-packet spraying and no loss, "dupack" resends spuriously while "subflows" (one
// subflow per path class: EV mod 8) resends nothing; with one loss, "subflows" still
// recovers by its dupACK rule (no timeout).
func TestRecoverySubflowsReorderingSafe(t *testing.T) {
	msgs := [][]byte{patterned(1<<20, 1), patterned(300<<10, 2)}
	spurious := map[string]uint64{}
	for _, mode := range []string{RecoveryDupAck, RecoverySubflows} {
		p := eightPaths(t, mode)
		recoveryRun(t, p, msgs)
		s := p.a.Stats()
		spurious[mode] = s.RetxSack + s.RetxTimeout + s.RetxNack
		t.Logf("%s: %d data packets, %d retransmissions", mode, s.DataSent, spurious[mode])
	}
	if spurious[RecoveryDupAck] == 0 {
		t.Errorf("dupack: no spurious retransmission under heavy reordering (the test does not reorder)")
	}
	if spurious[RecoverySubflows] != 0 {
		t.Errorf("subflows: %d spurious retransmissions, want 0", spurious[RecoverySubflows])
	}

	p := eightPaths(t, RecoverySubflows)
	dropped := false
	p.drop = func(from *Endpoint, b []byte) bool {
		psn, _, _, ok := dataPSN(b)
		if ok && from == p.a && !dropped && psn%64 == 17 {
			dropped = true
			return true
		}
		return false
	}
	recoveryRun(t, p, msgs)
	if s := p.a.Stats(); s.RetxSack != 1 || s.RetxTimeout != 0 {
		t.Errorf("subflows with one loss: %d dupACK and %d timeout retransmissions, want 1 and 0", s.RetxSack, s.RetxTimeout)
	}
}

// TestRecoveryGoBackN: one lost packet makes the receiver drop everything after it and
// send one go-back NACK; the sender resends the whole tail from the lost PSN; a packet
// merely reordered costs the same (the RoCE weakness under spraying).
func TestRecoveryGoBackN(t *testing.T) {
	for _, reorder := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.Recovery.Mode = RecoveryGoBackN
		cfg.CC = "fixed"
		p := newPair(t, cfg, 5000)
		var ser serializer
		var first uint32
		seen := 0
		target := func(b []byte) bool {
			psn, _, retx, ok := dataPSN(b)
			if !ok || retx {
				return false
			}
			if seen == 0 {
				first = psn
			}
			return psn == first+10
		}
		p.extra = func(from *Endpoint, b []byte) int64 {
			x := ser.at(p.now)
			if from == p.a && reorder && target(b) {
				x += 25
			}
			if _, _, _, ok := dataPSN(b); ok && from == p.a {
				seen++
			}
			return x
		}
		p.drop = func(from *Endpoint, b []byte) bool {
			return from == p.a && !reorder && target(b)
		}
		recoveryRun(t, p, [][]byte{patterned(400<<10, 3)})
		s, r := p.a.Stats(), p.b.Stats()
		t.Logf("reorder=%v: data %d, resent %d (nack %d, timeout %d), receiver dropped %d out of order, %d go-back NACKs",
			reorder, s.DataSent, s.RetxNack+s.RetxTimeout+s.RetxSack, s.RetxNack, s.RetxTimeout, r.OutOfOrderDrops, r.GoBackNacksSent)
		// Reordered, the late packet itself moves the expected PSN on to one that was
		// dropped: a second NACK, stale at the sender (that PSN is already resent).
		if r.GoBackNacksSent < 1 || r.GoBackNacksSent > 2 || s.GoBacks != 1 {
			t.Errorf("reorder=%v: %d go-back NACKs sent, %d acted on, want 1 (or 2 reordered) and 1", reorder, r.GoBackNacksSent, s.GoBacks)
		}
		if r.OutOfOrderDrops == 0 || r.OutOfOrderDrops > s.RetxNack {
			t.Errorf("reorder=%v: receiver dropped %d out of order, sender went back over %d", reorder, r.OutOfOrderDrops, s.RetxNack)
		}
		if s.RetxNack < 2 || s.RetxSack != 0 || s.RetxTimeout != 0 {
			t.Errorf("reorder=%v: resent %d by go-back, %d by SACK, %d by timeout: want the whole tail by go-back", reorder, s.RetxNack, s.RetxSack, s.RetxTimeout)
		}
	}
}

// TestRecoveryModesAllocateNothingPerPacket: the dupack, subflows and gobackn paths
// (sender, receiver, ACK) allocate nothing per packet in steady state.
func TestRecoveryModesAllocateNothingPerPacket(t *testing.T) {
	for _, mode := range []string{RecoveryDupAck, RecoverySubflows, RecoveryGoBackN} {
		if a, _ := steadyAllocs(t, mode); a > 0.05 {
			t.Errorf("%s: %.3f allocations per packet", mode, a)
		}
	}
}

// TestRecoveryYAML: the recovery block as the daemon's config file and a scenario's
// transport section write it.
func TestRecoveryYAML(t *testing.T) {
	cfg := DefaultConfig()
	doc := "recovery:\n  mode: ec\n  k: 10\n  m: 2\n"
	if err := config.DecodeYAML([]byte(doc), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if k, m := cfg.ECBlock(); cfg.Recovery.Mode != RecoveryEC || k != 10 || m != 2 {
		t.Fatalf("decoded %+v", cfg.Recovery)
	}
	cfg = DefaultConfig()
	doc = "recovery: {mode: subflows, dup_thresh: 6, queue_bytes: 65536, flows_per_host: 2}\n"
	if err := config.DecodeYAML([]byte(doc), &cfg); err != nil {
		t.Fatal(err)
	}
	if n := cfg.SubflowCount(); n != 6 { // 4 x 64 KiB / (4 KiB x 2 x 6) = 5.3
		t.Fatalf("subflows from Eq. 1: %d, want 6", n)
	}
	cfg = DefaultConfig()
	if err := config.DecodeYAML([]byte("recovery: {mode: roce}\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewEndpoint(cfg, nil2()); err == nil || !strings.Contains(err.Error(), `recovery.mode = "roce"`) {
		t.Fatalf("bad mode: err = %v", err)
	}
	if err := config.DecodeYAML([]byte("recovery: {modes: ec}\n"), &cfg); err == nil || !strings.Contains(err.Error(), "modes") {
		t.Fatalf("unknown key: err = %v", err)
	}
}

// TestRecoveryModesWithAuth: parity and go-back NACKs are sealed and opened like every
// packet: with authentication on, EC rebuilds two lost packets per block without a
// resend, and go-back-N goes back once over one loss.
func TestRecoveryModesWithAuth(t *testing.T) {
	for _, mode := range []string{RecoveryEC, RecoveryGoBackN} {
		cfg := DefaultConfig()
		cfg.Recovery.Mode, cfg.Recovery.K, cfg.Recovery.M = mode, 10, 2
		cfg.Auth.Mode, cfg.Auth.Key = seal.Auth, seal.Key{7}
		cfg.CC = "fixed"
		p := newPair(t, cfg, 5000)
		var ser serializer
		p.extra = func(from *Endpoint, b []byte) int64 { return ser.at(p.now) }
		var first uint32
		seen := false
		p.drop = func(from *Endpoint, b []byte) bool {
			if from != p.a || len(b) < wire.DataHdrLen+seal.Overhead || wire.Type(b[0]&0x0f) != wire.TypeData {
				return false
			}
			var q wire.Packet
			if q.Decode(b[:len(b)-seal.Overhead]) != nil || q.Flags&(wire.FlagEC|wire.FlagRetx) != 0 {
				return false
			}
			if !seen {
				first, seen = q.Data.PSN, true
			}
			if mode == RecoveryGoBackN {
				return q.Data.PSN == first+10
			}
			i := int(q.Data.Offset) / cfg.MTU % 10
			return i == 2 || i == 6
		}
		if mode == RecoveryEC {
			ecWarm(t, p) // parity is kept from proven peers only
		}
		recoveryRun(t, p, [][]byte{patterned(10*10*cfg.MTU, 9)})
		s, r := p.a.Stats(), p.b.Stats()
		if r.Auth.Failed != 0 {
			t.Fatalf("%s: %d packets failed authentication", mode, r.Auth.Failed)
		}
		switch mode {
		case RecoveryEC:
			if r.ECRebuilt != 20 || s.RetxSack+s.RetxNack+s.RetxTimeout != 0 {
				t.Errorf("ec with auth: rebuilt %d (want 20), resent %d", r.ECRebuilt, s.RetxSack+s.RetxNack+s.RetxTimeout)
			}
		case RecoveryGoBackN:
			if s.GoBacks != 1 || s.RetxTimeout != 0 {
				t.Errorf("gobackn with auth: %d go-backs (want 1), %d timeouts", s.GoBacks, s.RetxTimeout)
			}
		}
	}
}

// eightPaths returns a pair in recovery mode with 8 subflows, sprayed over 8 paths whose
// delays differ by up to 3 us.
func eightPaths(t *testing.T, mode string) *pair {
	cfg := DefaultConfig()
	cfg.Recovery.Mode = mode
	cfg.Recovery.Subflows = 8
	cfg.LB = "ops"
	p := newPair(t, cfg, 5000)
	p.extra = pathsDelay(p, 8, 3000)
	return p
}

// steadyAllocs returns the allocations per packet of a 1 MiB-message throughput rig in
// recovery mode, after 10,000 packets of warm-up, and then its sender's stats.
func steadyAllocs(t *testing.T, mode string) (float64, Stats) {
	cfg := DefaultConfig()
	cfg.Recovery.Mode = mode
	r := newThroughputRig(t, 1<<20, cfg)
	for range 10000 {
		r.stepAny()
	}
	a := testing.AllocsPerRun(2560, r.stepAny)
	return a, r.snd.Stats()
}
