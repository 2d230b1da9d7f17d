package hpcc

import (
	"math"
	"strings"
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/internal/ccunit"
	"github.com/smartt-transport/smartt/transport/wire"
)

// On ccunit.Net, 100 Gbit/s and T = 12 us: B x T = 150,000 bytes.
const (
	rateMbps = 100_000
	bt       = 150_000 // B x T, bytes
	tns      = 12_000
)

func params(t testing.TB, mod func(*Config)) *Params {
	if mod == nil {
		mod = func(*Config) {}
	}
	return ccunit.Params(t, DefaultConfig(), NewParams, mod)
}

// path is a sequence of INT records per hop, advanced by feeding it a time step, the
// bytes each hop sent in it and the queue each hop has.
type path struct {
	now  int64
	recs []wire.INTHop
}

func newPath(hops int) *path {
	p := &path{now: 1_000_000, recs: make([]wire.INTHop, hops)}
	for i := range p.recs {
		p.recs[i] = wire.INTHop{TS: 0xffff_0000, TxBytes: 0xffff_ff00, Rate: rateMbps} // both wrap soon
	}
	return p
}

// ack advances by dt ns, hop i having sent tx[i] bytes and holding q[i] bytes.
func (p *path) ack(dt int64, tx, q []int) cc.Ack {
	p.now += dt
	for i := range p.recs {
		p.recs[i].TS += uint32(dt)
		p.recs[i].TxBytes += uint32(tx[i])
		p.recs[i].QLen = uint32(q[i])
	}
	return cc.Ack{Now: p.now, Bytes: 4096, Packets: 1, RTT: tns, InFlight: 100_000, INT: p.recs}
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// TestUtilisationEstimate: U = min(qlen, qlen_prev)/(B T) + txRate/B of the most loaded
// hop, smoothed with weight tau/T (tau = the sample's interval, at most T), across the
// 32-bit wrap of the switch's clock and byte counter.
func TestUtilisationEstimate(t *testing.T) {
	h := New(params(t, nil))
	p := newPath(2)
	h.OnAck(p.ack(tns, []int{bt, bt}, []int{0, 0})) // first records: nothing to difference
	if h.Utilisation() != 0 || h.Window() != bt {
		t.Fatalf("first ACK: U %v, W %d", h.Utilisation(), h.Window())
	}
	// Hop 1 sends at line rate with half a BDP queued (now and before: min(q, q_prev)),
	// hop 0 at half rate with no queue: U = 0.5 + 1.0 over a whole T.
	h.OnAck(p.ack(tns, []int{bt / 2, bt}, []int{0, bt / 2}))
	h.OnAck(p.ack(tns, []int{bt / 2, bt}, []int{0, bt / 2}))
	if u := h.Utilisation(); !near(u, 1.5, 1e-4) {
		t.Fatalf("U = %v, want 1.5", u)
	}
	// A sample over T/4 weighs 1/4: idle path (u = 0) -> U = 0.75 x 1.5.
	h.OnAck(p.ack(tns/4, []int{0, 0}, []int{0, 0}))
	if u := h.Utilisation(); !near(u, 1.125, 1e-4) {
		t.Fatalf("U = %v after a quarter-T idle sample, want 1.125", u)
	}
	// The queue term takes the smaller of the two queue readings.
	h2 := New(params(t, nil))
	p2 := newPath(1)
	h2.OnAck(p2.ack(tns, []int{0}, []int{bt}))
	h2.OnAck(p2.ack(tns, []int{0}, []int{bt / 4}))
	if u := h2.Utilisation(); !near(u, 0.25, 1e-4) {
		t.Fatalf("U = %v, want min(q)/BT = 0.25", u)
	}
}

// TestMultiplicativeStepTowardEta: with U above eta the window becomes Wc x eta / U +
// W_AI, and the reference window follows once per RTT.
func TestMultiplicativeStepTowardEta(t *testing.T) {
	pr := params(t, nil)
	h := New(pr)
	p := newPath(1)
	h.OnAck(p.ack(tns, []int{bt}, []int{bt}))
	h.OnAck(p.ack(tns, []int{bt}, []int{bt})) // U = 2: the first ACK updates Wc
	wc := int64(bt)
	want := wc*int64(pr.eta)/int64(h.s.u) + pr.wai
	if h.Utilisation() < 1.99 || int64(h.Window()) != want || int64(h.RefWindow()) != want {
		t.Fatalf("U %v: W %d, Wc %d, want both %d (= %d x 0.95/2 + %d)", h.Utilisation(), h.Window(), h.RefWindow(), want, wc, pr.wai)
	}
	if got := float64(want) / bt; !near(got, 0.95/2, 0.002) {
		t.Fatalf("W/Wc = %v, want eta/U", got)
	}
	// Within the same RTT (the ACK covers data sent before the update), W moves, Wc stays.
	wc = int64(h.RefWindow())
	h.OnAck(p.ack(tns, []int{bt}, []int{bt / 2})) // U = 1.5
	if int64(h.RefWindow()) != wc || int64(h.Window()) != wc*int64(pr.eta)/int64(h.s.u)+pr.wai {
		t.Fatalf("within an RTT: Wc %d (was %d), W %d", h.RefWindow(), wc, h.Window())
	}
	if h.CCStats().Cuts != 1 {
		t.Fatalf("cuts %d, want 1 (one reference update above eta)", h.CCStats().Cuts)
	}
}

// TestAdditiveStages: below eta the reference window grows by W_AI once per RTT for
// max_stage RTTs; the next update is multiplicative (Wc x eta / U, a large step up
// when U is small), and the stage count restarts.
func TestAdditiveStages(t *testing.T) {
	pr := params(t, func(c *Config) { c.WAI = 1000 })
	h := New(pr)
	h.s.w, h.s.wc = 50_000, 50_000
	p := newPath(1)
	h.OnAck(p.ack(tns, []int{bt / 2}, []int{0}))
	rtt := func() {
		// One RTT: the update ACK, then ACKs of data sent before it.
		a := p.ack(tns, []int{bt / 2}, []int{0})
		a.Bytes, a.InFlight = 60_000, 50_000
		h.OnAck(a)
	}
	for i := 1; i <= 5; i++ {
		rtt()
		if h.RefWindow() != 50_000+1000*i || h.Window() != h.RefWindow() {
			t.Fatalf("stage %d: Wc %d, W %d, want %d", i, h.RefWindow(), h.Window(), 50_000+1000*i)
		}
	}
	rtt() // stage 6 = max_stage reached: multiplicative, toward eta
	want := int64(55_000)*int64(pr.eta)/int64(h.s.u) + 1000
	if int64(h.RefWindow()) != want || h.s.stage != 0 {
		t.Fatalf("after max_stage: Wc %d, want %d (U %v), stage %d", h.RefWindow(), want, h.Utilisation(), h.s.stage)
	}
	rtt()
	if int64(h.RefWindow()) != want+1000 {
		t.Fatalf("stages restart: Wc %d, want %d", h.RefWindow(), want+1000)
	}
	// An ACK within the RTT applies W = Wc + W_AI without moving Wc.
	a := p.ack(tns, []int{bt / 2}, []int{0})
	a.Bytes = 1
	h.OnAck(a)
	if int64(h.RefWindow()) != want+1000 || int64(h.Window()) != want+2000 {
		t.Fatalf("within an RTT: Wc %d, W %d", h.RefWindow(), h.Window())
	}
}

// TestWindowBounds: the window stays within [max(W_AI, 64), BDP].
func TestWindowBounds(t *testing.T) {
	pr := params(t, nil)
	h := New(pr)
	p := newPath(1)
	for range 200 {
		h.OnAck(p.ack(tns, []int{bt}, []int{64 * bt}))
	}
	if w := int64(h.Window()); w < pr.wmin || w > pr.wmin+pr.wai {
		t.Fatalf("under a huge queue: W %d, want about W_AI (floor %d)", w, pr.wmin)
	}
	for range 2000 {
		a := p.ack(tns, []int{0}, []int{0})
		a.Bytes = 1 << 20
		h.OnAck(a)
	}
	if h.Window() != bt || h.PacingRate() != 12_500_000_000 {
		t.Fatalf("on an idle path: W %d, rate %d B/s, want the BDP at line rate", h.Window(), h.PacingRate())
	}
}

// TestNoUsableTelemetry: ACKs without records, with a changed hop count, after a stale
// gap, or with an impossible rate (two ports' counters) leave the window alone; losses
// too.
func TestNoUsableTelemetry(t *testing.T) {
	pr := params(t, nil)
	h := New(pr)
	for range 10 {
		h.OnAck(cc.Ack{Now: 1000, Bytes: 4096})
		h.OnLoss(cc.Loss{Now: 1000, Bytes: 4096, Cause: cc.LossTimeout})
	}
	if h.Window() != bt || h.Utilisation() != 0 {
		t.Fatalf("without INT: W %d", h.Window())
	}
	p := newPath(2)
	h.OnAck(p.ack(tns, []int{bt, bt}, []int{bt, bt}))
	short := p.ack(tns, []int{bt, bt}, []int{bt, bt})
	short.INT = short.INT[:1]
	h.OnAck(short) // the path changed length: a new reference, no sample
	if h.Window() != bt {
		t.Fatalf("hop count changed: W %d", h.Window())
	}
	p1 := newPath(1)
	p1.recs[0] = short.INT[0]
	p1.now = short.Now
	stale := p1.ack(staleNs+1, []int{bt}, []int{bt})
	h.OnAck(stale)
	if h.Window() != bt {
		t.Fatalf("stale previous record: W %d", h.Window())
	}
	// Counters from another port: 10 x line rate. Only the (empty) queue term counts.
	h.OnAck(p1.ack(tns, []int{10 * bt}, []int{0}))
	if h.Utilisation() != 0 {
		t.Fatalf("impossible rate counted: U %v", h.Utilisation())
	}
}

// TestParamsLimits: each parameter at and beyond its range.
func TestParamsLimits(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Eta = 0.5 }, ""},
		{func(c *Config) { c.Eta = 1 }, ""},
		{func(c *Config) { c.Eta = 0.49 }, "eta"},
		{func(c *Config) { c.Eta = 1.01 }, "eta"},
		{func(c *Config) { c.Eta = math.NaN() }, "eta"},
		{func(c *Config) { c.MaxStage = 0 }, ""},
		{func(c *Config) { c.MaxStage = 100 }, ""},
		{func(c *Config) { c.MaxStage = 101 }, "max_stage"},
		{func(c *Config) { c.MaxStage = -1 }, "max_stage"},
		{func(c *Config) { c.ExpectedFlows = 0 }, "expected_flows"},
		{func(c *Config) { c.ExpectedFlows = 1 << 20 }, ""},
		{func(c *Config) { c.ExpectedFlows = 1<<20 + 1 }, "expected_flows"},
		{func(c *Config) { c.WAI = bt }, ""},
		{func(c *Config) { c.WAI = bt + 1 }, "w_ai"},
		{func(c *Config) { c.WAI = -1 }, "w_ai"},
	} {
		cfg := DefaultConfig()
		tc.mod(&cfg)
		_, err := NewParams(cfg, ccunit.Net)
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", cfg, err, tc.want)
		}
	}
	if p := params(t, nil); p.wai != bt*3277/65536/100 {
		t.Errorf("default W_AI %d, want W_init (1 - eta) / 100", p.wai)
	}
}

// TestOnAckAllocatesNothing: the per-ACK path allocates nothing.
func TestOnAckAllocatesNothing(t *testing.T) {
	h := New(params(t, nil))
	p := newPath(5)
	tx, q := []int{bt, bt, bt, bt, bt}, []int{0, 100, 2000, 0, 0}
	if a := testing.AllocsPerRun(1000, func() { h.OnAck(p.ack(tns/8, tx, q)) }); a != 0 {
		t.Fatalf("%v allocations per ACK", a)
	}
}

// BenchmarkOnAck measures one ACK carrying 5 hops of records.
func BenchmarkOnAck(b *testing.B) {
	h := New(params(b, nil))
	p := newPath(5)
	tx, q := []int{bt / 8, bt / 8, bt / 9, bt / 8, bt / 8}, []int{0, 100, 2000, 0, 0}
	acks := make([]cc.Ack, 64)
	for i := range acks {
		q[2] = i * 500
		a := p.ack(tns/8, tx, q)
		a.INT = append([]wire.INTHop(nil), a.INT...)
		acks[i] = a
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.OnAck(acks[i&63])
	}
}
