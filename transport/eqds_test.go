package transport

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/eqds"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/transport/seal"
	"github.com/smartt-transport/smartt/transport/wire"
)

// eqdsPair is a pair running EQDS whose sender controllers are kept for inspection.
func eqdsPair(t *testing.T, delay int64, mod func(*Config)) (*pair, *[]*eqds.Sender) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.CC = "eqds"
	if mod != nil {
		mod(&cfg)
	}
	prm, err := eqdsParams(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	senders := new([]*eqds.Sender)
	newCC := func() cc.Controller {
		s := eqds.New(prm)
		*senders = append(*senders, s)
		return s
	}
	return newPair(t, cfg, delay, Hooks{NewCC: newCC}), senders
}

// deliver runs the pair until want messages arrived at b (and were confirmed to a),
// calling check after every step, and returns them.
func deliver(t *testing.T, p *pair, want int, limit int64, check func()) [][]byte {
	t.Helper()
	var got [][]byte
	sent := 0
	p.runUntil(t, limit, func() bool {
		if check != nil {
			check()
		}
		for _, ev := range events(p.b) {
			if ev.Kind == MessageReceived {
				got = append(got, ev.Data)
			}
		}
		for _, ev := range events(p.a) {
			switch ev.Kind {
			case MessageSent:
				sent++
			case MessageFailed:
				t.Fatalf("message failed: %v", ev.Err)
			}
		}
		return len(got) >= want && sent >= want
	})
	return got
}

// Credit accounting end to end: at every step of a 4 MiB transfer, the bytes the
// sender has sent are at most its speculative window plus the credit PULLs granted it
// (no packet is lost, so none is refunded); the transfer is credit-bound (it sends far
// more than the window), and the receiver's pacer, not the ideal wire, sets its pace:
// the bytes beyond the first window take at least their time at the link rate.
func TestEQDSCreditBoundsWhatIsSent(t *testing.T) {
	p, senders := eqdsPair(t, 3000, nil)
	id, err := p.a.Dial(0, p.bAddr)
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 4<<20)
	for i := range msg {
		msg[i] = byte(i * 13)
	}
	if _, err := p.a.Send(0, id, msg); err != nil {
		t.Fatal(err)
	}
	cfg := p.a.Config()
	spec := eqds.New(mustEQDSParams(t, &cfg)).Credit()
	checked := 0
	got := deliver(t, p, 1, 1e9, func() {
		s := (*senders)[0]
		if int(s.Requested()) > spec+int(s.Granted())+int(s.Refunded()) {
			t.Fatalf("sent %d > speculative %d + granted %d + refunded %d", s.Requested(), spec, s.Granted(), s.Refunded())
		}
		if s.Refunded() != 0 {
			t.Fatalf("%d bytes refunded on a lossless pair", s.Refunded())
		}
		checked++
	})
	if !bytes.Equal(got[0], msg) {
		t.Fatal("message corrupted")
	}
	s := (*senders)[0]
	st, rt := p.a.Stats(), p.b.Stats()
	if int(s.Requested()) < 4*spec || rt.PullsSent == 0 || st.PullsRecv == 0 || st.BadPulls+st.StalePulls != 0 {
		t.Fatalf("not credit-bound: sent %d (window %d), PULLs sent %d, received %d, bad %d, stale %d",
			s.Requested(), spec, rt.PullsSent, st.PullsRecv, st.BadPulls, st.StalePulls)
	}
	wire := int64(len(msg)-spec) / int64(cfg.MTU) * int64(cfg.MTU+wire.DataHdrLen)
	paced := wire * 8 * 1e9 / int64(cfg.LinkRate)
	if p.now < paced || p.now > paced*12/10+20_000 {
		t.Fatalf("4 MiB took %d ns; the receiver's pacer allows no less than %d ns", p.now, paced)
	}
	t.Logf("%d steps checked; %d ns (paced bound %d ns), %d PULLs", checked, p.now, paced, rt.PullsSent)
}

// Under loss (one data packet in 25 dropped, no trimming) the bound holds with the
// refunds: the bytes sent are at most the speculative window, the grants and the bytes
// of packets judged lost; and in flight and unspent credit together stay within two
// windows (conservation keeps them at one, plus refunds of packets late, not lost).
func TestEQDSCreditBoundUnderLoss(t *testing.T) {
	p, senders := eqdsPair(t, 3000, func(c *Config) { c.Trimming = false; c.MinRTO, c.InitialRTO = 50_000, 50_000 })
	np := dropData(p, 25, 3)
	id, _ := p.a.Dial(0, p.bAddr)
	msg := bytes.Repeat([]byte{5}, 4<<20)
	p.a.Send(0, id, msg)
	cfg := p.a.Config()
	spec := mustEQDSParams(t, &cfg).Speculative()
	c := p.a.conns[uint64(id)]
	got := deliver(t, p, 1, 1e9, func() {
		s := (*senders)[0]
		if int(s.Requested()) > spec+int(s.Granted())+int(s.Refunded()) {
			t.Fatalf("sent %d > speculative %d + granted %d + refunded %d", s.Requested(), spec, s.Granted(), s.Refunded())
		}
		if c.inflight+s.Credit() > 2*spec {
			t.Fatalf("in flight %d + credit %d beyond twice the window %d", c.inflight, s.Credit(), spec)
		}
	})
	s := (*senders)[0]
	n := *np
	if !bytes.Equal(got[0], msg) || s.Refunded() == 0 || n < 1000 {
		t.Fatalf("refunded %d bytes over %d data packets", s.Refunded(), n)
	}
	t.Logf("%d data packets, %d dropped, %d bytes refunded", n, n/25, s.Refunded())
}

func mustEQDSParams(t *testing.T, cfg *Config) *eqds.Params {
	t.Helper()
	prm, err := eqdsParams(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return prm
}

// pullTo encodes a PULL from the receiver's connection src to the sender's dst.
func pullTo(t *testing.T, dst, src, granted uint64) []byte {
	t.Helper()
	pk := wire.Packet{Header: wire.Header{Type: wire.TypePull, DstConn: dst, SrcConn: src}, Pull: wire.Pull{Granted: granted}}
	b := make([]byte, wire.PullLen)
	if _, err := pk.Encode(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// PULLs from the network are validated: one for an unknown connection, one granting
// more than the connection ever sent, a stale one, one to a connection that does not
// send against credit, and a malformed one are each dropped and counted, change no
// credit, and answer nothing.
func TestEQDSPullValidation(t *testing.T) {
	p, senders := eqdsPair(t, 3000, nil)
	id, err := p.a.Dial(0, p.bAddr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.a.Send(0, id, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	deliver(t, p, 1, 1e9, nil)
	c := p.a.conns[uint64(id)]
	s := (*senders)[0]
	credit, granted := s.Credit(), s.Granted()
	meta := RxMeta{From: p.bAddr}
	quiet := func(what string) {
		t.Helper()
		if tx, ok := p.a.PollTransmit(p.now, p.buf); ok {
			t.Fatalf("%s: answered with a %v", what, tx.Type)
		}
		if s.Credit() != credit || s.Granted() != granted {
			t.Fatalf("%s: credit %d -> %d, granted %d -> %d", what, credit, s.Credit(), granted, s.Granted())
		}
	}
	st := p.a.Stats()
	p.a.HandlePacket(p.now, pullTo(t, 12345, c.peerID, 4096), meta)
	if d := p.a.Stats().UnknownConn - st.UnknownConn; d != 1 {
		t.Fatalf("PULL for an unknown connection: UnknownConn +%d", d)
	}
	quiet("unknown connection")
	p.a.HandlePacket(p.now, pullTo(t, c.id, c.peerID, s.Requested()+1), meta)
	if d := p.a.Stats().BadPulls - st.BadPulls; d != 1 {
		t.Fatalf("PULL beyond the demand: BadPulls +%d", d)
	}
	quiet("beyond the demand")
	p.a.HandlePacket(p.now, pullTo(t, c.id, c.peerID, granted), meta)
	if d := p.a.Stats().StalePulls - st.StalePulls; d != 1 {
		t.Fatalf("stale PULL: StalePulls +%d", d)
	}
	quiet("stale")
	bad := pullTo(t, c.id, c.peerID, 1)
	clear(bad[24:]) // Granted 0
	p.a.HandlePacket(p.now, bad, meta)
	if d := p.a.Stats().MalformedByKind[wire.ErrLength.Code] - st.MalformedByKind[wire.ErrLength.Code]; d != 1 {
		t.Fatalf("PULL granting 0: ErrLength +%d", d)
	}
	quiet("malformed")
	other := meta
	other.From = p.aAddr // right IDs, wrong host
	p.a.HandlePacket(p.now, pullTo(t, c.id, c.peerID, s.Requested()), other)
	if d := p.a.Stats().ProtoViolations - st.ProtoViolations; d != 1 {
		t.Fatalf("PULL from a third party: ProtoViolations +%d", d)
	}
	quiet("third party")

	// A connection under another controller takes no credit.
	f := newPair(t, DefaultConfig(), 3000)
	fid, _ := f.a.Dial(0, f.bAddr)
	f.a.Send(0, fid, []byte("x"))
	deliver(t, f, 1, 1e9, nil)
	fc := f.a.conns[uint64(fid)]
	f.a.HandlePacket(f.now, pullTo(t, fc.id, fc.peerID, 1), RxMeta{From: f.bAddr})
	if f.a.Stats().BadPulls != 1 || f.a.Stats().PullsRecv != 1 {
		t.Fatalf("PULL to a fixed-window connection: BadPulls %d", f.a.Stats().BadPulls)
	}
}

// A sender that ignores credit (a fixed 8 MiB window against an EQDS receiver) cannot
// make the receiver owe it without bound: the receiver caps each connection's
// outstanding requests (and counts the excess), the sender drops the PULLs it cannot
// use, and every message still arrives exactly once.
func TestEQDSGreedySenderBounded(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CC = "eqds"
	p := newPair(t, cfg, 3000)
	greedy := DefaultConfig()
	greedy.CC = "fixed"
	greedy.InitialWindow = 8 << 20
	a, err := NewEndpoint(greedy, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	p.a = a
	id, _ := p.a.Dial(0, p.bAddr)
	msg := bytes.Repeat([]byte{7}, 4<<20)
	p.a.Send(0, id, msg)
	got := deliver(t, p, 1, 1e9, nil)
	if len(got) != 1 || !bytes.Equal(got[0], msg) {
		t.Fatal("message lost or corrupted")
	}
	rb, sa := p.b.Stats(), p.a.Stats()
	if rb.PullDebtCapped == 0 || sa.BadPulls == 0 || sa.BadPulls != sa.PullsRecv {
		t.Fatalf("debt capped %d times, sender dropped %d of %d PULLs", rb.PullDebtCapped, sa.BadPulls, sa.PullsRecv)
	}
	prm := mustEQDSParams(t, &cfg)
	for _, c := range p.b.list {
		if c.rxPull.Pending() > prm.DebtCap() {
			t.Fatalf("pending requests %d beyond the cap %d", c.rxPull.Pending(), prm.DebtCap())
		}
	}
	// Everything granted was granted in at most one-MTU PULLs at the link rate:
	// the receiver granted no more than the arrivals asked for.
	if g := p.b.list[0].rxPull.Granted(); g > uint64(len(msg)) {
		t.Fatalf("granted %d bytes for %d received", g, len(msg))
	}
}

// Lost PULLs: every PULL of the first 200 us is dropped. The sender spends its
// speculative window, then waits with nothing in flight; its probe makes the receiver
// send its cumulative grant again, and the transfer completes.
func TestEQDSLostPullsRecovered(t *testing.T) {
	p, senders := eqdsPair(t, 3000, func(c *Config) { c.MinRTO, c.InitialRTO = 20_000, 20_000 })
	var pk wire.Packet
	dropped := 0
	p.drop = func(from *Endpoint, b []byte) bool {
		if from == p.b && pk.Decode(b) == nil && pk.Type == wire.TypePull && p.now < 200_000 {
			dropped++
			return true
		}
		return false
	}
	id, _ := p.a.Dial(0, p.bAddr)
	msg := bytes.Repeat([]byte{3}, 1<<20)
	p.a.Send(0, id, msg)
	got := deliver(t, p, 1, 1e9, nil)
	if !bytes.Equal(got[0], msg) {
		t.Fatal("message corrupted")
	}
	st := p.a.Stats()
	if dropped == 0 || st.ProbesSent == 0 || st.PullsRecv == 0 || (*senders)[0].Refunded() != 0 {
		t.Fatalf("%d PULLs dropped, %d probes, %d PULLs received, %d refunded", dropped, st.ProbesSent, st.PullsRecv, (*senders)[0].Refunded())
	}
	if p.now < 200_000 {
		t.Fatalf("done at %d ns, before the PULLs came back", p.now)
	}
	t.Logf("%d PULLs dropped; %d probes; done at %d ns", dropped, st.ProbesSent, p.now)
}

// eqdsRig is one EQDS connection driven in 40 ns steps of virtual time: every datagram
// either side has is delivered at once, so the receiver's pacer alone paces the data.
type eqdsRig struct {
	tb         testing.TB
	snd, rcv   *Endpoint
	sAddr      netip.AddrPort
	rAddr      netip.AddrPort
	id         ConnID
	msg, buf   []byte
	pool       *recycler
	now        int64
	queued     int
	data, acks int // data packets and messages sent
}

func newEQDSRig(tb testing.TB) *eqdsRig {
	cfg := DefaultConfig()
	cfg.CC = "eqds"
	pool := &recycler{}
	snd, err := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2)), Hooks{Buffers: pool})
	if err != nil {
		tb.Fatal(err)
	}
	rcv, _ := NewEndpoint(cfg, rand.New(rand.NewPCG(3, 4)), Hooks{Buffers: pool})
	r := &eqdsRig{tb: tb, snd: snd, rcv: rcv, pool: pool,
		sAddr: netip.MustParseAddrPort("10.0.0.1:23600"), rAddr: netip.MustParseAddrPort("10.0.0.2:23600"),
		msg: make([]byte, 1<<20), buf: make([]byte, cfg.MTU+128)}
	r.id, _ = snd.Dial(0, r.rAddr)
	r.refill()
	return r
}

func (r *eqdsRig) refill() {
	for ; r.queued < 4; r.queued++ {
		if _, err := r.snd.Send(r.now, r.id, r.msg); err != nil {
			r.tb.Fatal(err)
		}
	}
}

func (r *eqdsRig) step() {
	r.now += 40
	for _, e := range []*Endpoint{r.snd, r.rcv} {
		if d, ok := e.NextTimeout(); ok && d <= r.now {
			e.HandleTimeout(r.now)
		}
	}
	for {
		t, ok := r.snd.PollTransmit(r.now, r.buf)
		if !ok {
			break
		}
		if t.Type == wire.TypeData {
			r.data++
		}
		r.rcv.HandlePacket(r.now, r.buf[:t.N], RxMeta{From: r.sAddr})
	}
	for {
		t, ok := r.rcv.PollTransmit(r.now, r.buf)
		if !ok {
			break
		}
		r.snd.HandlePacket(r.now, r.buf[:t.N], RxMeta{From: r.rAddr})
	}
	for ev := range pending(r.snd) {
		if ev.Kind == MessageSent {
			r.queued--
			r.acks++
		}
	}
	for ev := range pending(r.rcv) {
		if ev.Kind == MessageReceived {
			r.pool.Put(ev.Data)
		}
	}
	r.refill()
}

// The EQDS engine path (credit, PULLs, the pacer) allocates nothing per packet in
// steady state, and the pacer holds the data at the link rate even on a wire with no
// delay and no serialisation.
func TestEQDSNoAllocsPerPacket(t *testing.T) {
	r := newEQDSRig(t)
	for range 20_000 {
		r.step()
	}
	d0, t0 := r.data, r.now
	const steps = 25_000 // 1 ms
	a := testing.AllocsPerRun(steps/1000, func() {
		for range 1000 {
			r.step()
		}
	})
	// 26 x 1000 steps ran (AllocsPerRun warms once). Per-message work (the receive
	// buffer's chunk table, the event) may allocate a little; nothing per packet.
	if perPkt := a / (float64(r.data-d0) / 26); perPkt > 0.05 {
		t.Errorf("%.3f allocations per data packet (%.2f per 1,000 steps)", perPkt, a)
	}
	// The data rate is the link rate: the pacer alone spaces the data.
	rate := float64(r.data-d0) * float64(4096+wire.DataHdrLen) * 8 / (float64(r.now-t0) / 1e9)
	if rate < 0.99e11 || rate > 1.0001e11 {
		t.Fatalf("data at %.4g bit/s on a 100 Gbit/s link", rate)
	}
	if r.acks == 0 {
		t.Fatal("no message completed")
	}
}

// BenchmarkEQDSEngine moves data packets over one EQDS connection: one op is one data
// packet with its share of the PULLs, ACKs and idle polling of the 40 ns steps it took.
func BenchmarkEQDSEngine(b *testing.B) {
	r := newEQDSRig(b)
	for range 20_000 {
		r.step()
	}
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		for d := r.data; r.data == d; {
			r.step()
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pkts/s")
}

// The "eqds" block of the YAML config (the daemon's file, scenario files) sets the
// parameters; a bad one is refused with its name; only an endpoint running EQDS paces
// PULLs.
func TestEQDSConfigYAML(t *testing.T) {
	cfg := DefaultConfig()
	doc := "cc: eqds\neqds:\n  speculative_bdp: 2\n  pull_rate: 0.5\n  wire_overhead: 66\n  queue_target_mtus: 0\n"
	if err := config.DecodeYAML([]byte(doc), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.CC != "eqds" || cfg.EQDS != (eqds.Config{SpeculativeBDP: 2, PullRate: 0.5, WireOverhead: 66, PullBurstMTUs: 8}) {
		t.Fatalf("decoded %+v", cfg.EQDS)
	}
	e, err := NewEndpoint(cfg, nil2())
	if pp, ok := e.pull.(*pullPacer); err != nil || !ok || pp.p.Speculative() != 300_000 {
		t.Fatalf("endpoint: %v, pacer %v", err, e != nil && e.pull != nil)
	}
	bad := cfg
	if err := config.DecodeYAML([]byte("eqds:\n  pull_rate: 2\n"), &bad); err != nil {
		t.Fatal(err)
	}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "eqds.pull_rate") {
		t.Fatalf("pull_rate 2: %v", err)
	}
	other := DefaultConfig()
	e, err = NewEndpoint(other, nil2())
	if err != nil || e.pull != nil {
		t.Fatalf("smartt endpoint has a pull pacer (%v)", err)
	}
	if r, _ := LookupCC("eqds"); r.Credit != "eqds" || r.Needs != (CCNeeds{}) {
		t.Fatalf("registration %+v", r)
	}
}

// With packet authentication on, PULLs are sealed and opened like every other packet.
func TestEQDSWithAuth(t *testing.T) {
	for _, mode := range []seal.Mode{seal.Auth, seal.Encrypt} {
		p, _ := eqdsPair(t, 3000, func(c *Config) { c.Auth.Mode, c.Auth.Key = mode, seal.Key{7} })
		id, _ := p.a.Dial(0, p.bAddr)
		msg := bytes.Repeat([]byte{9}, 1<<20)
		p.a.Send(0, id, msg)
		got := deliver(t, p, 1, 1e9, nil)
		if !bytes.Equal(got[0], msg) {
			t.Fatalf("%v: message corrupted", mode)
		}
		if st := p.a.Stats(); st.PullsRecv == 0 || st.BadPulls+st.StalePulls != 0 || st.Auth.Failed != 0 {
			t.Fatalf("%v: %d PULLs, %d bad, %d stale, %d failed authentication", mode, st.PullsRecv, st.BadPulls, st.StalePulls, st.Auth.Failed)
		}
	}
}
