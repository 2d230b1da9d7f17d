package ackpath_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/ackpath"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport/wire"
)

func coalescer(every int, maxDelay int64, clean bool) ackpath.Coalescer {
	return ackpath.NewCoalescer(ackpath.Config{Every: every, MaxDelay: config.Duration(maxDelay), CleanEVs: clean, SackWords: 4})
}

// take runs Take on a fresh ACK packet.
func take(c *ackpath.Coalescer) wire.Packet {
	var p wire.Packet
	p.Type = wire.TypeAck
	c.Take(&p)
	return p
}

// TestCoalescerEveryOne checks that Every=1 acknowledges each packet at once.
func TestCoalescerEveryOne(t *testing.T) {
	c := coalescer(1, 1_000_000, false)
	for i := range int64(5) {
		if !c.OnData(100*i, false, uint16(i), false) {
			t.Fatalf("packet %d: no ACK due with Every=1", i)
		}
		if d, ok := c.Deadline(); !ok || d != 100*i {
			t.Fatalf("packet %d: Deadline = %d, %v; want %d, true", i, d, ok, 100*i)
		}
		if p := take(&c); p.Ack.PktCount != 1 || p.Ack.CECount != 0 {
			t.Fatalf("packet %d: PktCount %d CECount %d, want 1 0", i, p.Ack.PktCount, p.Ack.CECount)
		}
		if c.Pending() || c.Due(100*i) {
			t.Fatalf("packet %d: still pending after Take", i)
		}
	}
}

// TestCoalescerEveryFour checks that Every=4 acknowledges on the fourth packet.
func TestCoalescerEveryFour(t *testing.T) {
	c := coalescer(4, 1_000_000, false)
	for round := range 3 {
		for i := range 3 {
			if c.OnData(int64(i), false, 0, false) {
				t.Fatalf("round %d: ACK due after %d packets", round, i+1)
			}
			if !c.Pending() {
				t.Fatalf("round %d: nothing pending after %d packets", round, i+1)
			}
		}
		if !c.OnData(3, false, 0, false) || !c.Due(3) {
			t.Fatalf("round %d: no ACK due after 4 packets", round)
		}
		if d, ok := c.Deadline(); !ok || d != 0 {
			t.Fatalf("round %d: Deadline = %d, %v; want 0 (already due), true", round, d, ok)
		}
		if p := take(&c); p.Ack.PktCount != 4 {
			t.Fatalf("round %d: PktCount %d, want 4", round, p.Ack.PktCount)
		}
	}
}

// TestCoalescerUrgent checks that an urgent packet makes the ACK due at once, and that
// urgency ends with Take.
func TestCoalescerUrgent(t *testing.T) {
	c := coalescer(8, 1_000_000, false)
	c.OnData(0, false, 0, false)
	if !c.OnData(1, false, 0, true) {
		t.Fatal("urgent packet: no ACK due")
	}
	if p := take(&c); p.Ack.PktCount != 2 {
		t.Fatalf("PktCount %d, want 2", p.Ack.PktCount)
	}
	if c.OnData(2, false, 0, false) {
		t.Fatal("urgency survived Take")
	}
	if !c.OnData(3, false, 0, true) {
		t.Fatal("urgent packet after a pending one: no ACK due")
	}
}

// TestCoalescerMaxDelay checks the deadline set by the oldest unacknowledged packet.
func TestCoalescerMaxDelay(t *testing.T) {
	c := coalescer(4, 1000, false)
	if _, ok := c.Deadline(); ok {
		t.Fatal("Deadline with nothing pending")
	}
	if c.Due(1 << 40) {
		t.Fatal("Due with nothing pending")
	}
	if c.OnData(100, false, 0, false) {
		t.Fatal("ACK due before MaxDelay")
	}
	if c.OnData(600, false, 0, false) {
		t.Fatal("ACK due before MaxDelay")
	}
	if d, ok := c.Deadline(); !ok || d != 1100 {
		t.Fatalf("Deadline = %d, %v; want 1100 (first arrival + MaxDelay), true", d, ok)
	}
	if c.Due(1099) {
		t.Fatal("Due one ns before the deadline")
	}
	if !c.Due(1100) || !c.Due(5000) {
		t.Fatal("not Due at the deadline")
	}
	if p := take(&c); p.Ack.PktCount != 2 {
		t.Fatalf("PktCount %d, want 2", p.Ack.PktCount)
	}
	c.OnData(2000, false, 0, false)
	if d, ok := c.Deadline(); !ok || d != 3000 {
		t.Fatalf("Deadline after Take = %d, %v; want 3000, true", d, ok)
	}
	// A packet arriving after the deadline passed is acknowledged at once.
	if !c.OnData(3000, false, 0, false) {
		t.Fatal("packet at the deadline: no ACK due")
	}

	z := coalescer(4, 0, false)
	if !z.OnData(5, false, 0, false) {
		t.Fatal("MaxDelay 0: ACK not due at once")
	}
}

// TestCoalescerCE checks the CE count and the clean-EV list.
func TestCoalescerCE(t *testing.T) {
	type pkt struct {
		ce bool
		ev uint16
	}
	in := []pkt{{false, 10}, {true, 11}, {false, 12}, {true, 13}, {true, 14}, {false, 10}, {false, 65535}}
	for _, clean := range []bool{false, true} {
		c := coalescer(len(in), 1_000_000, clean)
		for i, p := range in {
			if due := c.OnData(int64(i), p.ce, p.ev, false); due != (i == len(in)-1) {
				t.Fatalf("packet %d: due = %v", i, due)
			}
		}
		p := take(&c)
		if p.Ack.PktCount != 7 || p.Ack.CECount != 3 {
			t.Fatalf("CleanEVs %v: PktCount %d CECount %d, want 7 3", clean, p.Ack.PktCount, p.Ack.CECount)
		}
		got := p.Ack.CleanEVs[:p.Ack.NumClean]
		var want []uint16
		if clean {
			want = []uint16{10, 12, 10, 65535} // unmarked ones only, in arrival order, repeats kept
		}
		if !slices.Equal(got, want) {
			t.Fatalf("CleanEVs %v: clean EVs %v, want %v", clean, got, want)
		}
		if has := p.Flags&wire.FlagCleanEV != 0; has != clean {
			t.Fatalf("CleanEVs %v: FlagCleanEV = %v", clean, has)
		}
	}
}

// TestCoalescerCleanCap checks that at most wire.MaxCleanEVs clean EVs are reported,
// the first ones, and that the resulting ACK encodes.
func TestCoalescerCleanCap(t *testing.T) {
	c := coalescer(wire.MaxCleanEVs, 1_000_000, true)
	const n = 3 * wire.MaxCleanEVs / 2
	for i := range n {
		c.OnData(int64(i), i%10 == 9, uint16(1000+i), false) // the engine may fall behind
	}
	p := take(&c)
	if p.Ack.NumClean != wire.MaxCleanEVs || p.Ack.PktCount != n || p.Ack.CECount != n/10 {
		t.Fatalf("NumClean %d PktCount %d CECount %d, want %d %d %d",
			p.Ack.NumClean, p.Ack.PktCount, p.Ack.CECount, wire.MaxCleanEVs, n, n/10)
	}
	var want []uint16
	for i := 0; len(want) < wire.MaxCleanEVs; i++ {
		if i%10 != 9 {
			want = append(want, uint16(1000+i))
		}
	}
	if !slices.Equal(p.Ack.CleanEVs[:], want) {
		t.Fatalf("clean EVs %v, want %v", p.Ack.CleanEVs, want)
	}
	p.SrcConn, p.DstConn, p.Ack.SackWords = 1, 2, 4
	buf := make([]byte, wire.MaxAckLen)
	largest := wire.MaxAckLen - wire.INTLen(wire.MaxINTHops) // the largest ACK without an INT echo
	if n, err := p.Encode(buf); err != nil || n != largest {
		t.Fatalf("Encode = %d, %v; want %d, nil", n, err, largest)
	}
}

// TestCoalescerCounterSaturation checks the 16-bit counters saturate instead of wrapping.
func TestCoalescerCounterSaturation(t *testing.T) {
	c := coalescer(wire.MaxCleanEVs, 1<<62, false)
	for i := range 70000 {
		c.OnData(int64(i), true, 0, false)
	}
	if p := take(&c); p.Ack.PktCount != 0xffff || p.Ack.CECount != 0xffff {
		t.Fatalf("PktCount %d CECount %d, want 65535 65535", p.Ack.PktCount, p.Ack.CECount)
	}
}

// TestCoalescerTakeResets checks that Take starts a new interval, keeps unrelated flags
// and clears a stale FlagCleanEV on a reused packet.
func TestCoalescerTakeResets(t *testing.T) {
	c := coalescer(4, 1000, true)
	c.OnData(0, true, 1, true)
	c.OnData(1, false, 2, false)
	var p wire.Packet
	p.Type, p.Flags = wire.TypeAck, wire.FlagCE
	c.Take(&p)
	if p.Ack.PktCount != 2 || p.Ack.CECount != 1 || p.Ack.NumClean != 1 || p.Ack.CleanEVs[0] != 2 {
		t.Fatalf("first ACK: %+v", p.Ack)
	}
	if p.Flags != wire.FlagCE|wire.FlagCleanEV {
		t.Fatalf("first ACK flags %#x, want CE|CleanEV", p.Flags)
	}
	if c.Pending() || c.Due(1<<40) {
		t.Fatal("pending after Take")
	}
	if _, ok := c.Deadline(); ok {
		t.Fatal("Deadline after Take")
	}

	// Reuse p: only a CE-marked packet since, so no clean EVs and no flag.
	c.OnData(10, true, 3, false)
	c.Take(&p)
	if p.Ack.PktCount != 1 || p.Ack.CECount != 1 || p.Ack.NumClean != 0 {
		t.Fatalf("second ACK: %+v", p.Ack)
	}
	if p.Flags != wire.FlagCE {
		t.Fatalf("second ACK flags %#x, want CE only (stale FlagCleanEV must be cleared)", p.Flags)
	}
	p.SrcConn, p.DstConn, p.Ack.SackWords = 1, 2, 1
	if _, err := p.Encode(make([]byte, wire.MaxAckLen)); err != nil {
		t.Fatalf("reused ACK does not encode: %v", err)
	}

	// Take with nothing pending reports zeros.
	c.Take(&p)
	if p.Ack.PktCount != 0 || p.Ack.CECount != 0 || p.Ack.NumClean != 0 {
		t.Fatalf("empty Take: %+v", p.Ack)
	}
}

// TestConfigValidate checks that each invalid field is named in the error.
func TestConfigValidate(t *testing.T) {
	if err := ackpath.DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	for _, ok := range []ackpath.Config{{Every: wire.MaxCleanEVs, MaxDelay: 0, SackWords: 1},
		{Every: 1, SackWords: 4, CompleteDelay: ackpath.MaxCompleteDelay}, {Every: 1, SackWords: 4, CompleteDelay: 1}} {
		if err := ok.Validate(); err != nil {
			t.Fatalf("boundary config %+v: %v", ok, err)
		}
	}
	with := func(f func(*ackpath.Config)) ackpath.Config { c := ackpath.DefaultConfig(); f(&c); return c }
	tests := []struct {
		name string
		cfg  ackpath.Config
		want []string
	}{
		{"every 0", with(func(c *ackpath.Config) { c.Every = 0 }), []string{"ack.every"}},
		{"every 65", with(func(c *ackpath.Config) { c.Every = wire.MaxCleanEVs + 1 }), []string{"ack.every"}},
		{"max_delay -1", with(func(c *ackpath.Config) { c.MaxDelay = -1 }), []string{"ack.max_delay"}},
		{"sack_words 0", with(func(c *ackpath.Config) { c.SackWords = 0 }), []string{"ack.sack_words"}},
		{"sack_words 5", with(func(c *ackpath.Config) { c.SackWords = 5 }), []string{"ack.sack_words"}},
		{"complete_delay -1", with(func(c *ackpath.Config) { c.CompleteDelay = -1 }), []string{"ack.complete_delay"}},
		{"complete_delay max+1", with(func(c *ackpath.Config) { c.CompleteDelay = ackpath.MaxCompleteDelay + 1 }), []string{"ack.complete_delay"}},
		{"all", ackpath.Config{Every: -1, MaxDelay: -1, SackWords: 9}, []string{"ack.every", "ack.max_delay", "ack.sack_words"}},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if err == nil {
			t.Errorf("%s: Validate accepted %+v", tt.name, tt.cfg)
			continue
		}
		for _, field := range []string{"ack.every", "ack.max_delay", "ack.sack_words", "ack.complete_delay"} {
			if named, want := strings.Contains(err.Error(), field+" = "), slices.Contains(tt.want, field); named != want {
				t.Errorf("%s: error %q names %s: %v, want %v", tt.name, err, field, named, want)
			}
		}
	}
}

// The immediate-ACK triggers: with OnReorder off, reordering shallower than the
// reorder threshold waits for Every; a deep hole, a filled hole, CE (with OnCE), an ACK
// request and a completion do not.
func TestUrgent(t *testing.T) {
	legacy := ackpath.DefaultConfig()
	sprayed := legacy
	sprayed.OnReorder, sprayed.OnCE = false, true
	const thr = 32
	for _, tc := range []struct {
		name               string
		cfg                ackpath.Config
		psn, before, after uint32
		ce, req, complete  bool
		want               bool
	}{
		{"in order", sprayed, 10, 10, 11, false, false, false, false},
		{"in order legacy", legacy, 10, 10, 11, false, false, false, false},
		{"shallow reorder", sprayed, 15, 10, 10, false, false, false, false},
		{"shallow reorder legacy", legacy, 15, 10, 10, false, false, false, true},
		{"hole at threshold", sprayed, 10 + thr, 10, 10, false, false, false, true},
		{"hole past threshold wraps", sprayed, 5, 0xfffffff0, 0xfffffff0, false, false, false, false},
		{"deep hole across wrap", sprayed, thr, 0xfffffff0, 0xfffffff0, false, false, false, true},
		{"fills a hole", sprayed, 10, 10, 20, false, false, false, true},
		{"fills a hole legacy", legacy, 10, 10, 20, false, false, false, false},
		{"ce", sprayed, 15, 10, 10, true, false, false, true},
		{"ce without on_ce", legacy, 10, 10, 11, true, false, false, false},
		{"ack request", sprayed, 10, 10, 11, false, true, false, true},
		{"completion", sprayed, 10, 10, 11, false, false, true, true},
	} {
		if got := tc.cfg.Urgent(tc.psn, tc.before, tc.after, tc.ce, tc.req, tc.complete, thr); got != tc.want {
			t.Errorf("%s: Urgent = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestEveryBytes: with every_bytes 16384 (htsim's) and every 64, 4-KiB packets are ACKed
// every fourth (at the threshold, not one byte before it), 1,000-byte ones every 17th;
// the packet count still applies; the limits are checked.
func TestEveryBytes(t *testing.T) {
	cfg := ackpath.Config{Every: 64, EveryBytes: 16384, MaxDelay: 1 << 40, SackWords: 1}
	c := ackpath.NewCoalescer(cfg)
	for i := 1; i <= 12; i++ {
		due := c.OnDataBytes(int64(i), false, 1, 4096, false)
		if due != (i%4 == 0) {
			t.Fatalf("4096-byte packet %d: due = %v", i, due)
		}
		if d, _ := c.Deadline(); due && d != int64(i-3) {
			t.Fatalf("packet %d: deadline %d, want the oldest pending packet's arrival %d", i, d, i-3)
		}
		if due {
			var p wire.Packet
			c.Take(&p)
			if p.Ack.PktCount != 4 {
				t.Fatalf("ACK covers %d packets, want 4", p.Ack.PktCount)
			}
		}
	}
	c = ackpath.NewCoalescer(cfg)
	if c.OnDataBytes(0, false, 1, 16383, false) {
		t.Fatal("16383 bytes: due below the threshold")
	}
	if !c.OnDataBytes(0, false, 1, 1, false) {
		t.Fatal("16384 bytes: not due at the threshold")
	}
	cfg.Every = 3 // the packet count comes first here
	c = ackpath.NewCoalescer(cfg)
	for i := 1; i <= 3; i++ {
		if due := c.OnDataBytes(0, false, 1, 1000, false); due != (i == 3) {
			t.Fatalf("every 3, packet %d: due = %v", i, due)
		}
	}
	// OnData counts no bytes: without EveryBytes nothing changes.
	c = ackpath.NewCoalescer(ackpath.Config{Every: 2, MaxDelay: 1 << 40, SackWords: 1})
	if c.OnDataBytes(0, false, 1, 1<<20, false) {
		t.Fatal("every_bytes 0: bytes made an ACK due")
	}
	for _, tc := range []struct {
		v  int
		ok bool
	}{{0, true}, {1, true}, {ackpath.MaxEveryBytes, true}, {-1, false}, {ackpath.MaxEveryBytes + 1, false}} {
		cfg := ackpath.DefaultConfig()
		cfg.EveryBytes = tc.v
		err := cfg.Validate()
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "ack.every_bytes")) {
			t.Errorf("every_bytes = %d: %v, want ok=%v", tc.v, err, tc.ok)
		}
	}
}

// TestDeferFill: with on_reorder off, a packet filling a hole is urgent unless defer_fill
// is set (htsim forces no ACK for it); a hole past the reorder threshold stays urgent.
func TestDeferFill(t *testing.T) {
	cfg := ackpath.DefaultConfig()
	cfg.OnReorder = false
	if !cfg.Urgent(10, 10, 20, false, false, false, 32) {
		t.Fatal("filled hole not urgent without defer_fill")
	}
	cfg.DeferFill = true
	if cfg.Urgent(10, 10, 20, false, false, false, 32) {
		t.Fatal("filled hole urgent with defer_fill")
	}
	if !cfg.Urgent(42, 10, 10, false, false, false, 32) {
		t.Fatal("hole at the reorder threshold not urgent with defer_fill")
	}
}

// holder is a coalescer with ack.complete_delay d.
func holder(every int, maxDelay, d int64) ackpath.Coalescer {
	return ackpath.NewCoalescer(ackpath.Config{Every: every, MaxDelay: config.Duration(maxDelay), SackWords: 4,
		CompleteDelay: config.Duration(d)})
}

// TestHoldUntilDeadline: a held completion's ACK is not due before now + CompleteDelay,
// is due exactly then (Deadline says so), and Take ends the hold.
func TestHoldUntilDeadline(t *testing.T) {
	for _, every := range []int{1, 64} {
		c := holder(every, 10_000, 50_000)
		if c.Hold(1000, false, 7, 64) {
			t.Fatalf("every %d: held ACK due at once", every)
		}
		if !c.Held() || !c.Pending() {
			t.Fatalf("every %d: Held %v Pending %v after Hold", every, c.Held(), c.Pending())
		}
		if d, ok := c.Deadline(); !ok || d != 51_000 {
			t.Fatalf("every %d: Deadline = %d, %v; want 51000 (hold, not max_delay), true", every, d, ok)
		}
		if c.Due(50_999) || !c.Due(51_000) {
			t.Fatalf("every %d: Due(50999) %v Due(51000) %v, want false true", every, c.Due(50_999), c.Due(51_000))
		}
		if p := take(&c); p.Ack.PktCount != 1 {
			t.Fatalf("every %d: PktCount %d", every, p.Ack.PktCount)
		}
		if c.Held() || c.Pending() {
			t.Fatalf("every %d: still held after Take", every)
		}
		// The next packet follows the policy again.
		if got := c.OnData(60_000, false, 0, false); got != (every == 1) {
			t.Fatalf("every %d: OnData after Take due %v", every, got)
		}
	}
}

// TestHoldOff: without CompleteDelay, Hold is an urgent OnData.
func TestHoldOff(t *testing.T) {
	c := holder(64, 10_000, 0)
	if !c.Hold(5, false, 0, 64) || c.Held() {
		t.Fatalf("Hold without complete_delay: not due at once (Held %v)", c.Held())
	}
}

// TestHoldNeverLater: a hold never makes packets already waiting wait past their own
// deadline, and packets already owed an ACK get it at once.
func TestHoldNeverLater(t *testing.T) {
	c := holder(64, 10_000, 50_000)
	c.OnData(1000, false, 0, false) // due at 11000 by max_delay
	if c.Hold(4000, false, 1, 64) {
		t.Fatal("held ACK due at once")
	}
	if d, ok := c.Deadline(); !ok || d != 11_000 {
		t.Fatalf("Deadline = %d, %v; want 11000 (the earlier packet's max_delay)", d, ok)
	}
	if c.Due(10_999) || !c.Due(11_000) {
		t.Fatal("not due exactly at the earlier packet's deadline")
	}
	// Every = 1: a packet waiting already is owed its ACK now.
	c = holder(1, 10_000, 50_000)
	c.OnData(1000, false, 0, false)
	if !c.Hold(2000, false, 1, 64) {
		t.Fatal("Hold behind a packet owed an ACK: not due")
	}
	// Two holds: the first one's deadline stands.
	c = holder(64, 10_000, 50_000)
	c.Hold(1000, false, 0, 64)
	c.Hold(2000, false, 1, 64)
	if d, _ := c.Deadline(); d != 51_000 {
		t.Fatalf("second hold moved the deadline to %d, want 51000", d)
	}
}

// TestHoldEnds: a hold waits for one answer: a packet not held (its policy applies again),
// an urgent one, or more than Every held packets end it.
func TestHoldEnds(t *testing.T) {
	c := holder(64, 10_000, 50_000)
	c.Hold(1000, false, 0, 64)
	if c.OnData(2000, false, 1, true) == false || c.Held() {
		t.Fatal("urgent packet did not end the hold")
	}
	c = holder(4, 10_000, 50_000)
	c.Hold(1000, false, 0, 64)
	if c.OnData(2000, false, 1, false) || c.Held() {
		t.Fatalf("packet not held: Due %v (want false: 2 of every 4) Held %v (want false)", c.Due(2000), c.Held())
	}
	if d, _ := c.Deadline(); d != 11_000 {
		t.Fatalf("after the hold ended Deadline = %d, want 11000 (max_delay from the oldest)", d)
	}
	c = holder(1, 10_000, 50_000)
	c.Hold(1000, false, 0, 64)
	if !c.Hold(2000, false, 1, 64) {
		t.Fatal("every 1: a second held packet did not end the hold")
	}
	c = holder(2, 10_000, 50_000)
	c.Hold(1000, false, 0, 64)
	if c.Hold(1500, false, 1, 64) {
		t.Fatal("every 2: second held packet due")
	}
	if !c.Hold(2000, false, 2, 64) {
		t.Fatal("every 2: third held packet not due")
	}
}
