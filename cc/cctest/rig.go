// Package cctest is the closed-loop test rig every congestion controller's tests share:
// n senders and one receiver on the test network's switch, 100 Gbit/s everywhere, the
// port toward the receiver the bottleneck, with the papers' switch settings (1 BDP of
// buffer, RED/ECN 20 %..80 %, trimming or not), driving real transport endpoints.
package cctest

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/config"
	"github.com/smartt-transport/smartt/test/testnet"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/wire"
)

// The rig's network constants.
const (
	LinkRate = 100_000_000_000 // bits/s
	MTU      = 4096            // payload bytes per packet
	Delay    = 5000            // one-way propagation, ns
	Latency  = 500             // switch traversal, ns
	AckBytes = wire.AckFixedLen + 8*wire.MaxSackWords
)

// BaseRTT is the RTT of an empty path: propagation and switch latency both ways, and a
// data packet and an ACK each serialised by a NIC and by a switch port.
func BaseRTT() int64 {
	ser := func(b int) int64 { return int64(b) * 8 * 1_000_000_000 / LinkRate }
	return 2*(Delay+Latency) + 2*ser(MTU+wire.DataHdrLen) + 2*ser(AckBytes)
}

// BDP is the bandwidth-delay product of the rig's path, bytes.
func BDP() int { return int(LinkRate / 8 * BaseRTT() / 1_000_000_000) }

// Config is the transport configuration of the rig's endpoints before Options.Mod.
func Config(trim bool) transport.Config {
	cfg := transport.DefaultConfig()
	cfg.MTU = MTU
	cfg.LinkRate = config.Rate(LinkRate)
	cfg.BaseRTT = config.Duration(BaseRTT())
	cfg.Trimming = trim
	// RTO: the REPS paper's rule (every queue on the path full plus the base RTT) with
	// margin: 3 base RTTs.
	cfg.MinRTO = config.Duration(3 * BaseRTT())
	cfg.InitialRTO = cfg.MinRTO
	cfg.IdleTimeout = 10_000_000_000
	return cfg
}

// Options configure a rig.
type Options struct {
	Senders  int                     // senders, addresses 10.0.0.1..
	Trim     bool                    // switches trim instead of dropping
	Seed     uint64                  // seeds the network and the endpoints
	SampleNs int64                   // queue sampling interval at the bottleneck (0: off)
	RTO      int64                   // MinRTO, ns (0: 3 base RTTs)
	Mod      func(*transport.Config) // changes to the endpoints' configuration
	// NewCC, if set, builds sender i's controllers (else Config.CC by name).
	NewCC func(i int) cc.Controller
	// BufferBDPs sizes the bottleneck's data queue in BDPs (0: 1, the papers' setting);
	// the RED thresholds stay at 0.2 and 0.8 BDP.
	BufferBDPs float64
}

// Rig is one closed-loop experiment.
type Rig struct {
	T      testing.TB            // the test
	Net    *testnet.Network      // the network, virtual time
	RX     *transport.Endpoint   // the receiver
	RXAddr netip.AddrPort        // its address
	TX     []*transport.Endpoint // the senders
	TXAddr []netip.AddrPort      // their addresses
	Conn   []transport.ConnID    // each sender's connection to the receiver
	Port   testnet.PortConfig    // the bottleneck port's configuration
	Cfg    transport.Config      // the endpoints' configuration

	SentAt    [][]int64 // per sender: MessageSent times
	RecvAt    []int64   // MessageReceived times at the receiver
	RecvBytes int64
	Failed    int
}

// New builds a rig; each sender has dialled the receiver.
func New(t testing.TB, o Options) *Rig {
	t.Helper()
	bdp := BDP()
	cfg := Config(o.Trim)
	if o.RTO > 0 {
		cfg.MinRTO = config.Duration(o.RTO)
		cfg.InitialRTO = cfg.MinRTO
	}
	if o.Mod != nil {
		o.Mod(&cfg)
	}
	// The switch stamps INT when the endpoints send INT blocks (transport.int).
	r := &Rig{T: t, Net: testnet.New(testnet.Config{Delay: Delay, INT: cfg.INT}, o.Seed+1)}
	buf := bdp
	if o.BufferBDPs > 0 {
		buf = int(o.BufferBDPs * float64(bdp))
	}
	r.Port = testnet.PortConfig{
		Rate: LinkRate, BufferBytes: buf, ControlBytes: bdp,
		KminBytes: bdp / 5, KmaxBytes: bdp * 4 / 5, Trim: o.Trim, Latency: Latency,
		SampleInterval: o.SampleNs,
	}
	r.Cfg = cfg
	var err error
	r.RXAddr = netip.MustParseAddrPort("10.0.0.100:23600")
	r.RX, err = transport.NewEndpoint(cfg, rand.New(rand.NewPCG(o.Seed, 1000)))
	if err != nil {
		t.Fatal(err)
	}
	r.Net.Attach(r.RXAddr, r.RX, testnet.HostConfig{NICRate: LinkRate, Port: r.Port})
	ackPort := r.Port
	ackPort.SampleInterval = 0
	r.SentAt = make([][]int64, o.Senders)
	for i := range o.Senders {
		var hk transport.Hooks
		if o.NewCC != nil {
			hk.NewCC = func() cc.Controller { return o.NewCC(i) }
		}
		ep, err := transport.NewEndpoint(cfg, rand.New(rand.NewPCG(o.Seed, uint64(i))), hk)
		if err != nil {
			t.Fatal(err)
		}
		addr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 23600)
		r.Net.Attach(addr, ep, testnet.HostConfig{NICRate: LinkRate, Port: ackPort})
		id, err := ep.Dial(0, r.RXAddr)
		if err != nil {
			t.Fatal(err)
		}
		r.TX, r.TXAddr, r.Conn = append(r.TX, ep), append(r.TXAddr, addr), append(r.Conn, id)
	}
	return r
}

// Send queues a message of n bytes on sender i now.
func (r *Rig) Send(i, n int) {
	if _, err := r.TX[i].Send(r.Net.Now(), r.Conn[i], make([]byte, n)); err != nil {
		r.T.Fatal(err)
	}
	r.Net.Wake(r.TXAddr[i])
}

// Poll drains every endpoint's events into the rig's records.
func (r *Rig) Poll() {
	for i, ep := range r.TX {
		for {
			ev, ok := ep.PollEvent()
			if !ok {
				break
			}
			switch ev.Kind {
			case transport.MessageSent:
				r.SentAt[i] = append(r.SentAt[i], r.Net.Now())
			case transport.MessageFailed:
				r.Failed++
				r.T.Errorf("sender %d: message %d failed: %v", i, ev.MsgID, ev.Err)
			}
		}
	}
	for {
		ev, ok := r.RX.PollEvent()
		if !ok {
			break
		}
		if ev.Kind == transport.MessageReceived {
			r.RecvAt = append(r.RecvAt, r.Net.Now())
			r.RecvBytes += int64(len(ev.Data))
		}
	}
}

// Run advances until done holds or the deadline passes (virtual ns from now).
func (r *Rig) Run(d int64, done func() bool) bool {
	return r.Net.RunUntil(r.Net.Now()+d, func() bool {
		r.Poll()
		return done != nil && done() || r.T.Failed()
	})
}

// Sent counts MessageSent events over all senders.
func (r *Rig) Sent() int {
	n := 0
	for _, s := range r.SentAt {
		n += len(s)
	}
	return n
}

// Incast starts a message of msg bytes on every sender at once and runs until every
// one is delivered and acknowledged; it returns the completion time and the ideal (all
// bytes at the link rate plus one base RTT).
func (r *Rig) Incast(msg int) (took, ideal int64) {
	r.T.Helper()
	n := len(r.TX)
	for i := range n {
		r.Send(i, msg)
	}
	start := r.Net.Now()
	if !r.Run(2_000_000_000, func() bool { return r.Sent() == n && len(r.RecvAt) == n }) {
		r.T.Fatalf("incast incomplete: %d sent, %d received at %d ns", r.Sent(), len(r.RecvAt), r.Net.Now())
	}
	if r.RecvBytes != int64(n*msg) || r.Failed != 0 {
		r.T.Fatalf("received %d bytes, %d failed", r.RecvBytes, r.Failed)
	}
	return r.Net.Now() - start, int64(n*msg)*8*1_000_000_000/LinkRate + BaseRTT()
}

// Jain returns Jain's fairness index of xs (1: equal shares).
func Jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(xs)) * s2)
}

// Recorder wraps a controller and counts the bytes it saw acknowledged, and can
// record its window after every ACK.
type Recorder struct {
	cc.Controller         // the controller under test
	Acked         int64   // bytes acknowledged so far
	Record        bool    // record the timeline below
	Times         []int64 // ACK times, ns
	Acks          []int64 // cumulative acked bytes at Times
	Cwnd          []int   // window after each ACK
}

// OnAck forwards the ACK and records it.
func (f *Recorder) OnAck(a cc.Ack) {
	f.Controller.OnAck(a)
	f.Acked += int64(a.Bytes)
	if f.Record {
		f.Times, f.Acks, f.Cwnd = append(f.Times, a.Now), append(f.Acks, f.Acked), append(f.Cwnd, f.Window())
	}
}

// AckedAt returns the cumulative acknowledged bytes at time t (from the record).
func (f *Recorder) AckedAt(t int64) int64 {
	lo, hi := 0, len(f.Times)
	for lo < hi {
		m := (lo + hi) / 2
		if f.Times[m] <= t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0
	}
	return f.Acks[lo-1]
}

// Unwrap returns the wrapped controller (as the engine's snapshot expects of wrappers).
func (f *Recorder) Unwrap() cc.Controller { return f.Controller }
