package smartt_test

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/smartt"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/testnet"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/wire"
)

// The closed-loop rig: n senders and one receiver on the test network's switch, 100
// Gbit/s everywhere, the port toward the receiver the bottleneck, with the paper's
// switch settings (1 BDP of buffer, RED 20 %..80 %, trimming or not).
const (
	linkRate = 100_000_000_000
	mtu      = 4096
	delay    = 5000 // one-way propagation, ns
	latency  = 500  // switch traversal, ns
	ackBytes = wire.AckFixedLen + 8*wire.MaxSackWords
)

// baseRTT is the RTT of an empty path: propagation and switch latency both ways, and a
// data packet and an ACK each serialised by a NIC and by a switch port.
func baseRTT() int64 {
	ser := func(b int) int64 { return int64(b) * 8 * 1_000_000_000 / linkRate }
	return 2*(delay+latency) + 2*ser(mtu+wire.DataHdrLen) + 2*ser(ackBytes)
}

func bdpBytes() int { return int(linkRate / 8 * baseRTT() / 1_000_000_000) }

// sample is one ACK's view of a flow: time, window after it, bytes acknowledged so far.
type sample struct {
	t      int64
	cwnd   int
	acked  int64
	inflow int
}

// flow wraps one sender's controller: it records the timeline and, with a shadow,
// feeds the shadow the same events and tracks the largest window difference.
type flow struct {
	cc.Controller
	stats    func() smartt.Stats
	acked    int64
	timeline []sample
	record   bool
	shadow   interface {
		cc.Controller
		Cwnd() float64
	}
	live    interface{ Cwnd() float64 }
	steps   int
	maxErr  float64
	overMTU int
}

func (f *flow) OnAck(a cc.Ack) {
	f.Controller.OnAck(a)
	f.acked += int64(a.Bytes)
	if f.record {
		f.timeline = append(f.timeline, sample{a.Now, f.Window(), f.acked, a.InFlight})
	}
	f.compare(func(c cc.Controller) { c.OnAck(a) })
}

func (f *flow) OnLoss(l cc.Loss) {
	f.Controller.OnLoss(l)
	f.compare(func(c cc.Controller) { c.OnLoss(l) })
}

func (f *flow) compare(ev func(cc.Controller)) {
	if f.shadow == nil {
		return
	}
	ev(f.shadow)
	f.steps++
	d := f.shadow.Cwnd() - f.live.Cwnd()
	if d < 0 {
		d = -d
	}
	if d > f.maxErr {
		f.maxErr = d
	}
	if d > mtu {
		f.overMTU++
	}
}

type rigOpts struct {
	senders  int
	trim     bool
	fixed    bool // the live controllers are the fixed-point implementation
	shadow   bool // float live, fixed shadow
	record   bool
	mod      func(*smartt.Config)
	sampleNs int64 // queue sampling interval at the bottleneck (0: off)
	rto      int64 // MinRTO, ns (0: 3 base RTTs)
	seed     uint64
}

type rig struct {
	t      testing.TB
	net    *testnet.Network
	rx     *transport.Endpoint
	rxAddr netip.AddrPort
	tx     []*transport.Endpoint
	txAddr []netip.AddrPort
	conn   []transport.ConnID
	flows  []*flow
	params *smartt.Params
	port   testnet.PortConfig

	// filled by poll
	sentAt    [][]int64 // per sender: MessageSent times
	recvAt    []int64   // MessageReceived times at the receiver
	recvBytes int64
	failed    int
}

func newRig(t testing.TB, o rigOpts) *rig {
	t.Helper()
	bdp := bdpBytes()
	r := &rig{t: t, net: testnet.New(testnet.Config{Delay: delay}, o.seed+1)}
	r.port = testnet.PortConfig{
		Rate: linkRate, BufferBytes: bdp, ControlBytes: bdp,
		KminBytes: bdp / 5, KmaxBytes: bdp * 4 / 5, Trim: o.trim, Latency: latency,
		SampleInterval: o.sampleNs,
	}
	cfg := transport.DefaultConfig()
	cfg.MTU = mtu
	cfg.LinkRate = config.Rate(linkRate)
	cfg.BaseRTT = config.Duration(baseRTT())
	cfg.Trimming = o.trim
	// RTO: the REPS paper's rule, every queue on the path full plus the base RTT, with
	// margin: 3 base RTTs.
	cfg.MinRTO = config.Duration(3 * baseRTT())
	if o.rto > 0 {
		cfg.MinRTO = config.Duration(o.rto)
	}
	cfg.InitialRTO = cfg.MinRTO
	cfg.IdleTimeout = 10_000_000_000
	if o.mod != nil {
		o.mod(&cfg.SMaRTT)
	}
	p, err := smartt.NewParams(cfg.SMaRTT, cfg.Network(), cfg.Trimming)
	if err != nil {
		t.Fatal(err)
	}
	r.params = p
	r.rxAddr = netip.MustParseAddrPort("10.0.0.100:23600")
	r.rx, err = transport.NewEndpoint(cfg, rand.New(rand.NewPCG(o.seed, 1000)))
	if err != nil {
		t.Fatal(err)
	}
	r.net.Attach(r.rxAddr, r.rx, testnet.HostConfig{NICRate: linkRate, Port: r.port})
	ackPort := r.port
	ackPort.SampleInterval = 0
	r.sentAt = make([][]int64, o.senders)
	for i := range o.senders {
		scfg := cfg
		f := &flow{record: o.record}
		scfg.NewCC = func() cc.Controller {
			switch {
			case o.shadow:
				live := smartt.NewFloat(p)
				f.Controller, f.stats, f.live = live, live.Stats, live
				f.shadow = smartt.NewFixed(p)
			case o.fixed:
				c := smartt.NewFixed(p)
				f.Controller, f.stats = c, c.Stats
			default:
				c := smartt.NewFloat(p)
				f.Controller, f.stats = c, c.Stats
			}
			return f
		}
		ep, err := transport.NewEndpoint(scfg, rand.New(rand.NewPCG(o.seed, uint64(i))))
		if err != nil {
			t.Fatal(err)
		}
		addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 23600)
		r.net.Attach(addr, ep, testnet.HostConfig{NICRate: linkRate, Port: ackPort})
		id, err := ep.Dial(0, r.rxAddr)
		if err != nil {
			t.Fatal(err)
		}
		r.tx, r.txAddr, r.conn, r.flows = append(r.tx, ep), append(r.txAddr, addr), append(r.conn, id), append(r.flows, f)
	}
	return r
}

// send queues a message of n bytes on sender i now.
func (r *rig) send(i, n int) {
	if _, err := r.tx[i].Send(r.net.Now(), r.conn[i], make([]byte, n)); err != nil {
		r.t.Fatal(err)
	}
	r.net.Wake(r.txAddr[i])
}

// poll drains every endpoint's events into the rig's records.
func (r *rig) poll() {
	for i, ep := range r.tx {
		for {
			ev, ok := ep.PollEvent()
			if !ok {
				break
			}
			switch ev.Kind {
			case transport.MessageSent:
				r.sentAt[i] = append(r.sentAt[i], r.net.Now())
			case transport.MessageFailed:
				r.failed++
				r.t.Errorf("sender %d: message %d failed: %v", i, ev.MsgID, ev.Err)
			}
		}
	}
	for {
		ev, ok := r.rx.PollEvent()
		if !ok {
			break
		}
		if ev.Kind == transport.MessageReceived {
			r.recvAt = append(r.recvAt, r.net.Now())
			r.recvBytes += int64(len(ev.Data))
		}
	}
}

// run advances until done holds or the deadline passes (virtual ns from now).
func (r *rig) run(d int64, done func() bool) bool {
	return r.net.RunUntil(r.net.Now()+d, func() bool {
		r.poll()
		return done != nil && done() || r.t.Failed()
	})
}

func (r *rig) sent() int {
	n := 0
	for _, s := range r.sentAt {
		n += len(s)
	}
	return n
}

// sum adds the controllers' counters.
func (r *rig) sum() smartt.Stats {
	var s smartt.Stats
	for _, f := range r.flows {
		x := f.stats()
		s.Acks += x.Acks
		s.Ignored += x.Ignored
		s.FairDecrease += x.FairDecrease
		s.MultDecrease += x.MultDecrease
		s.FairIncrease += x.FairIncrease
		s.MultIncrease += x.MultIncrease
		s.WTDHeld += x.WTDHeld
		s.QuickAdapt += x.QuickAdapt
		s.FastIncrease += x.FastIncrease
		s.FastIncreaseAcks += x.FastIncreaseAcks
		s.LossTrim += x.LossTrim
		s.LossTimeout += x.LossTimeout
		s.LossSack += x.LossSack
		s.LossNotCut += x.LossNotCut
		s.ClampMin += x.ClampMin
		s.ClampMax += x.ClampMax
	}
	return s
}

// ackedAt returns a flow's cumulative acknowledged bytes at time t (from its timeline).
func (f *flow) ackedAt(t int64) int64 {
	lo, hi := 0, len(f.timeline)
	for lo < hi {
		m := (lo + hi) / 2
		if f.timeline[m].t <= t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0
	}
	return f.timeline[lo-1].acked
}
