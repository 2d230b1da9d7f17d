package eqds

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/internal/ccunit"
	"github.com/smartt-transport/smartt/config"
)

// params builds cfg on ccunit.Net (a BDP of 150,000 bytes) with 64 header bytes.
func params(t testing.TB, cfg Config) *Params {
	t.Helper()
	return ccunit.Params(t, cfg, hdr64)
}

func hdr64(c Config, n config.Network) (*Params, error) { return NewParams(c, n, 64) }

// The parameters' limits, at and beyond each bound.
func TestParamsLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string // "" = accepted
	}{
		{"defaults", func(*Config) {}, ""},
		{"speculative 100 BDP", func(c *Config) { c.SpeculativeBDP = 100 }, ""},
		{"speculative 100.01 BDP", func(c *Config) { c.SpeculativeBDP = 100.01 }, "speculative_bdp"},
		{"speculative 0", func(c *Config) { c.SpeculativeBDP = 0 }, "speculative_bdp"},
		{"pull rate 1", func(c *Config) { c.PullRate = 1 }, ""},
		{"pull rate 1.01", func(c *Config) { c.PullRate = 1.01 }, "pull_rate"},
		{"pull rate 0.01", func(c *Config) { c.PullRate = 0.01 }, ""},
		{"pull rate 0.009", func(c *Config) { c.PullRate = 0.009 }, "pull_rate"},
		{"overhead 1024", func(c *Config) { c.WireOverhead = 1024 }, ""},
		{"overhead 1025", func(c *Config) { c.WireOverhead = 1025 }, "wire_overhead"},
		{"overhead -1", func(c *Config) { c.WireOverhead = -1 }, "wire_overhead"},
		{"queue target 0", func(c *Config) { c.QueueTargetMTUs = 0 }, ""},
		{"burst 1", func(c *Config) { c.PullBurstMTUs = 1 }, ""},
		{"burst 1024", func(c *Config) { c.PullBurstMTUs = 1024 }, ""},
		{"burst 1025", func(c *Config) { c.PullBurstMTUs = 1025 }, "pull_burst_mtus"},
		{"burst 0", func(c *Config) { c.PullBurstMTUs = 0 }, "pull_burst_mtus"},
		{"queue target 1024", func(c *Config) { c.QueueTargetMTUs = 1024 }, ""},
		{"queue target 1025", func(c *Config) { c.QueueTargetMTUs = 1025 }, "queue_target_mtus"},
		{"queue target -1", func(c *Config) { c.QueueTargetMTUs = -1 }, "queue_target_mtus"},
	} {
		cfg := DefaultConfig()
		tc.mod(&cfg)
		_, err := NewParams(cfg, ccunit.Net, 64)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), "eqds."+tc.want)) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	// A window above 1 GiB is refused (100 BDPs of a 1 Tbit/s, 100 us path).
	big := config.Network{LinkRate: 1_000_000_000_000, BaseRTT: 100_000, MTU: 4096}
	if _, err := NewParams(Config{SpeculativeBDP: 100, PullRate: 1, PullBurstMTUs: 1}, big, 64); err == nil || !strings.Contains(err.Error(), "1 GiB") {
		t.Fatalf("1.25 GB window: %v", err)
	}
	// The window is at least one MTU, so a sender can always start.
	p := params(t, Config{SpeculativeBDP: 0.001, PullRate: 1, PullBurstMTUs: 1})
	if p.Speculative() != 4096 {
		t.Fatalf("speculative window %d, want one MTU", p.Speculative())
	}
	if p := params(t, DefaultConfig()); p.Speculative() != 150_000 || p.DebtCap() != 300_000 {
		t.Fatalf("speculative %d, debt cap %d on the reference network", p.Speculative(), p.DebtCap())
	}
}

// A sender starts with the speculative window and spends it; without a PULL it cannot
// send beyond it.
func TestSenderSpeculativeWindow(t *testing.T) {
	p := params(t, DefaultConfig())
	s := New(p)
	sent := 0
	for s.CanSend(4096, false) {
		s.OnSend(4096, false)
		sent += 4096
	}
	if sent != 150_000/4096*4096 || s.Credit() != 150_000-sent {
		t.Fatalf("sent %d on the speculative window, credit left %d", sent, s.Credit())
	}
	if s.CanSend(s.Credit()+1, false) {
		t.Fatal("may send beyond its credit")
	}
	if !s.CanSend(s.Credit(), false) {
		t.Fatal("may not spend its last bytes of credit")
	}
}

// Credit accounting: every PULL's new grant is added; stale, duplicated and excessive
// grants change nothing; credit never passes the speculative window.
func TestSenderCreditAccounting(t *testing.T) {
	p := params(t, DefaultConfig())
	s := New(p)
	for range 36 { // 147,456 bytes sent, 2,544 left
		s.OnSend(4096, false)
	}
	if v := s.OnPull(4096); v != PullOK || s.Credit() != 2544+4096 {
		t.Fatalf("first PULL: %v, credit %d", v, s.Credit())
	}
	if v := s.OnPull(4096); v != PullStale || s.Credit() != 2544+4096 {
		t.Fatalf("duplicate PULL: %v, credit %d", v, s.Credit())
	}
	if v := s.OnPull(3000); v != PullStale {
		t.Fatalf("reordered (older) PULL: %v", v)
	}
	if v := s.OnPull(s.Requested() + 1); v != PullExcess || s.Granted() != 4096 {
		t.Fatalf("PULL granting more than was sent: %v, granted %d", v, s.Granted())
	}
	if v := s.OnPull(s.Requested()); v != PullOK || s.Credit() != 150_000 {
		t.Fatalf("PULL of everything sent: %v, credit %d", v, s.Credit())
	}
	if s.Surplus() != 2544+4096+147_456-4096-150_000 {
		t.Fatalf("surplus %d", s.Surplus())
	}
	// The invariant the engine test checks end to end.
	if int(s.Requested()) > p.Speculative()+int(s.Granted()) {
		t.Fatalf("sent %d > speculative %d + granted %d", s.Requested(), p.Speculative(), s.Granted())
	}
}

// As in NDP, a retransmission waits for scheduled credit: the speculative window is
// for first transmissions only. A PULL or a refund gives scheduled credit; a sender with
// nothing outstanding gets its speculative window back.
func TestSenderRetransmissionsNeedPulls(t *testing.T) {
	p := params(t, DefaultConfig())
	s := New(p)
	for range 16 { // a 64 KiB message, far below the window
		s.OnSend(4096, false)
	}
	if !s.CanSend(4096, false) || s.CanSend(4096, true) {
		t.Fatal("a retransmission may use the speculative window")
	}
	s.OnPull(4096) // the receiver pulls for a trimmed header
	if !s.CanSend(4096, true) {
		t.Fatal("no retransmission after a PULL")
	}
	s.OnSend(4096, true)
	if s.CanSend(1, true) || s.Credit() != 150_000-16*4096 {
		t.Fatalf("the PULL's credit spent, %d left in all", s.Credit())
	}
	s.OnLoss(cc.Loss{Bytes: 4096, Cause: cc.LossTimeout})
	if !s.CanSend(4096, true) {
		t.Fatal("a refund gives no scheduled credit")
	}
	s.Respeculate()
	if s.Credit() != 150_000 || !s.CanSend(4096, true) {
		t.Fatalf("after respeculating: %d in all", s.Credit())
	}
	// Scheduled and speculative credit together never pass the window.
	s.OnPull(s.Requested())
	if s.Credit() != 150_000 {
		t.Fatalf("credit %d beyond the window", s.Credit())
	}
}

// A packet lost in the network gives its credit back (the receiver never pulls for
// it); a trimmed one does not (its header reached the receiver, which pulls for it).
func TestSenderLossRefund(t *testing.T) {
	p := params(t, DefaultConfig())
	s := New(p)
	for range 10 {
		s.OnSend(4096, false)
	}
	c0 := s.Credit()
	s.OnLoss(cc.Loss{Bytes: 4096, Cause: cc.LossTrim})
	if s.Credit() != c0 || s.Refunded() != 0 {
		t.Fatalf("trim refunded: credit %d -> %d", c0, s.Credit())
	}
	s.OnLoss(cc.Loss{Bytes: 4096, Cause: cc.LossSack})
	s.OnLoss(cc.Loss{Bytes: 1000, Cause: cc.LossTimeout})
	if s.Credit() != c0+5096 || s.Refunded() != 5096 {
		t.Fatalf("losses: credit %d -> %d, refunded %d", c0, s.Credit(), s.Refunded())
	}
	for range 100 {
		s.OnLoss(cc.Loss{Bytes: 4096, Cause: cc.LossTimeout})
	}
	if s.Credit() != p.Speculative() {
		t.Fatalf("credit %d beyond the cap %d", s.Credit(), p.Speculative())
	}
	if s.Window() != 2*p.Speculative() || s.PacingRate() != 0 {
		t.Fatalf("window %d, rate %d", s.Window(), s.PacingRate())
	}
}

// The receiver grants what arrivals asked for, one MTU per PULL, cumulatively; the
// outstanding requests of a connection are capped at and beyond the cap.
func TestPullStateGrantsAndCap(t *testing.T) {
	p := params(t, DefaultConfig())
	var r PullState
	if !r.Request(4096, p) || !r.Request(100, p) {
		t.Fatal("requests refused")
	}
	if g, cum := r.Grant(p); g != 4096 || cum != 4096 {
		t.Fatalf("grant %d cum %d", g, cum)
	}
	if g, cum := r.Grant(p); g != 100 || cum != 4196 || r.Pending() != 0 {
		t.Fatalf("grant %d cum %d pending %d", g, cum, r.Pending())
	}
	if g, cum := r.Grant(p); g != 0 || cum != 4196 {
		t.Fatalf("empty grant %d cum %d", g, cum)
	}
	// Up to the cap exactly: accepted.
	capB := int(p.DebtCap())
	if !r.Request(capB-4096, p) || !r.Request(4096, p) || r.Pending() != p.DebtCap() {
		t.Fatalf("requests up to the cap refused (pending %d)", r.Pending())
	}
	// One byte beyond: refused, and the pending requests stay at the cap.
	if r.Request(1, p) || r.Pending() != p.DebtCap() {
		t.Fatalf("a request beyond the cap accepted (pending %d)", r.Pending())
	}
	if r.Request(1<<40, p) || r.Pending() != p.DebtCap() {
		t.Fatalf("a huge request: pending %d", r.Pending())
	}
}

// The pacer spaces PULLs so that the packets they solicit fill the link exactly: after
// n full-size grants, n x (MTU + header) bytes at the link rate; with pull_rate 1/2,
// twice that. Polled late (a driver's timer firing after the deadline), a busy pacer
// keeps its schedule, sending what it owes at once up to pull_burst_mtus PULLs; an idle
// pacer woken by new requests banks nothing.
func TestPacerRate(t *testing.T) {
	for _, rate := range []float64{1, 0.5} {
		cfg := DefaultConfig()
		cfg.PullRate = rate
		p := params(t, cfg)
		var pc Pacer
		now := int64(1000)
		pc.Wake(now)
		const n = 10_000
		for range n {
			if !pc.Ready(now) {
				t.Fatal("pacer not ready at its own deadline")
			}
			pc.OnPull(now, 4096, p)
			if pc.Ready(now) {
				t.Fatal("two PULLs at once")
			}
			now = pc.Next()
		}
		want := float64(n) * (4096 + 64) * 8 / 100e9 * 1e9 / rate
		if got := float64(now - 1000); got < want-1 || got > want+1 {
			t.Fatalf("pull rate %v: %d PULLs took %.0f ns, want %.0f", rate, n, got, want)
		}
		// Polled every 5 spacings (late timers): five PULLs each time, the rate holds.
		t0, sent := now, 0
		for poll := now; sent < n; poll += 5 * p.slack {
			for pc.Ready(poll) && sent < n {
				pc.OnPull(poll, 4096, p)
				sent++
			}
		}
		if got := float64(pc.Next() - t0); got > want+1 {
			t.Fatalf("pull rate %v, late polls: %d PULLs took %.0f ns, want %.0f", rate, n, got, want)
		}
		// Polled 20 spacings late: about pull_burst_mtus (8) PULLs at once, no more.
		late := pc.Next() + 20*p.slack
		burst := 0
		for pc.Ready(late) {
			pc.OnPull(late, 4096, p)
			burst++
		}
		if burst < 8 || burst > 9 { // 8 spacings' worth, and the one due now
			t.Fatalf("pull rate %v: %d PULLs at once after a late poll, want 8 or 9", rate, burst)
		}
		// Idle for a long time, then woken: the next PULL is spaced from now.
		now = late + 1_000_000
		pc.Wake(now)
		pc.OnPull(now, 4096, p)
		if pc.Ready(now) {
			t.Fatal("after idling, two PULLs at once: the pacer banked time")
		}
	}
}

// The queueing delay of an arrival is its one-way delay above the connection's lowest,
// whatever the offset between the two hosts' clocks.
func TestQueueDelay(t *testing.T) {
	for _, off := range []int64{0, -1 << 50, 1 << 50, -5_000} {
		var r PullState
		for _, tc := range []struct{ owd, want int64 }{{3000, 0}, {5000, 2000}, {2500, 0}, {2600, 100}, {14_500, 12_000}} {
			if got := r.QueueDelay(tc.owd + off); got != tc.want {
				t.Fatalf("offset %d: owd %d: queueing %d, want %d", off, tc.owd, got, tc.want)
			}
		}
	}
}

// The drain: the first arrival opens a window of half a base RTT, in which each
// connection keeps its lowest queueing delay; the engine closes it with the largest of
// those minima, and the excess over the target delays the next PULL; no window opens
// for two base RTTs and the gap; a target of 0 turns it off. A trimmed header delays
// the next PULL by its time on the link.
func TestPacerDrain(t *testing.T) {
	p := params(t, DefaultConfig()) // target 2 x 333 ns, base RTT 12 us
	tgt := 2 * p.slack
	var pc Pacer
	pc.OnPull(0, 4096, p)
	next := pc.Next()
	var a, b PullState
	ep, ok := pc.Measuring(100, p)
	if !ok || pc.WindowDone(100) {
		t.Fatal("no window opened")
	}
	a.Record(ep, tgt+9000) // a fabric queue on one path
	a.Record(ep, tgt+5000) // its lowest
	b.Record(ep, tgt+3000) // a connection whose minimum one-way delay included queueing
	if pc.WindowDone(100 + 6000 - 1) {
		t.Fatal("window closed early")
	}
	if !pc.WindowDone(100 + 6000) {
		t.Fatal("window not closed after half a base RTT")
	}
	ma, _ := a.WindowMin(ep)
	mb, _ := b.WindowMin(ep)
	if ma != tgt+5000 || mb != tgt+3000 {
		t.Fatalf("window minima %d %d", ma, mb)
	}
	pc.Drain(6100, max(ma, mb), p)
	if pc.Next() != 6100+5000 || pc.Drains != 1 {
		t.Fatalf("next %d, want %d", pc.Next(), 6100+5000)
	}
	if _, ok := pc.Measuring(6100+24_000+5000-1, p); ok {
		t.Fatal("a window within two base RTTs and the gap of a drain")
	}
	ep2, ok := pc.Measuring(6100+24_000+5000, p)
	if !ok || ep2 == ep {
		t.Fatal("no new window after the drain's wait")
	}
	if _, ok := a.WindowMin(ep2); ok {
		t.Fatal("an old window's minimum counted in the new one")
	}
	pc.Drain(40_000, tgt, p) // at the target: nothing
	if pc.Drains != 1 {
		t.Fatal("drained at the target")
	}
	// A trimmed header delays the next PULL by its own time on the link.
	before := pc.Next()
	pc.OnTrim(before-1, p)
	if d := pc.Next() - before; d != p.hdr*8/100 {
		t.Fatalf("a trimmed header delayed the next PULL by %d ns, want %d", d, p.hdr*8/100)
	}
	_ = next
	off := params(t, Config{SpeculativeBDP: 1, PullRate: 1, PullBurstMTUs: 1})
	if _, ok := (&Pacer{}).Measuring(0, off); ok {
		t.Fatal("measuring with queue_target_mtus 0")
	}
}

// The NIC-side state is what Cost reports, and nothing allocates per packet.
func TestStateBytesAndAllocs(t *testing.T) {
	if got := int(unsafe.Sizeof(state{})+unsafe.Sizeof(PullState{})) + 4; got != StateBytes {
		t.Fatalf("state %d bytes, Cost says %d", got, StateBytes)
	}
	p := params(t, DefaultConfig())
	s := New(p)
	if c := s.Cost(); c.StateBytes != StateBytes || !c.IntegerOnly || c.Name != "eqds" {
		t.Fatalf("cost %+v", c)
	}
	var r PullState
	var pc Pacer
	now := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		s.OnSend(4096, false)
		r.Request(4096, p)
		_, cum := r.Grant(p)
		pc.OnPull(now, 4096, p)
		if ep, ok := pc.Measuring(now, p); ok {
			r.Record(ep, r.QueueDelay(now%7000))
		}
		if pc.WindowDone(now) {
			pc.Drain(now, 0, p)
		}
		now += 100
		s.OnPull(cum)
		s.OnLoss(cc.Loss{Bytes: 4096, Cause: cc.LossTimeout})
		s.OnAck(cc.Ack{Bytes: 4096})
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per packet", allocs)
	}
}

// BenchmarkPacket is one packet's EQDS work: the sender spends credit, the receiver
// records the request, grants and paces a PULL, the sender takes it.
func BenchmarkPacket(b *testing.B) {
	p := params(b, DefaultConfig())
	s := New(p)
	var r PullState
	var pc Pacer
	now := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		s.OnSend(4096, false)
		r.Request(4096, p)
		_, cum := r.Grant(p)
		pc.OnPull(now, 4096, p)
		now = pc.Next()
		s.OnPull(cum)
	}
}
