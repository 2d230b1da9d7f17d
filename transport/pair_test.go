package transport

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

// pair is two endpoints joined by an ideal wire with a fixed one-way delay, for tests of
// the engine alone (the test network in test/testnet models real impairments).
type pair struct {
	a, b       *Endpoint
	aAddr      netip.AddrPort
	bAddr      netip.AddrPort
	now, delay int64
	buf        []byte
	drop       func(from *Endpoint, b []byte) bool  // optional: drop this datagram
	extra      func(from *Endpoint, b []byte) int64 // optional: delay this datagram more
	ecn        func(from *Endpoint, b []byte) uint8 // optional: ECN bits the datagram arrives with
	dscp       func(from *Endpoint, b []byte) uint8 // optional: DSCP the datagram arrives with
	ttl        func(from *Endpoint, b []byte) uint8 // optional: IP TTL the datagram arrives with
	inflight   []flight
	aliased    int // datagrams whose payload came in Transmit.Payload
}

type flight struct {
	at   int64
	to   *Endpoint
	from netip.AddrPort
	data []byte
}

func newPair(t testing.TB, cfg Config, delay int64, hooks ...Hooks) *pair {
	t.Helper()
	a, err := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2)), hooks...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewEndpoint(cfg, rand.New(rand.NewPCG(3, 4)), hooks...)
	if err != nil {
		t.Fatal(err)
	}
	return &pair{a: a, b: b,
		aAddr: netip.MustParseAddrPort("10.0.0.1:23600"), bAddr: netip.MustParseAddrPort("10.0.0.2:23600"),
		delay: delay, buf: make([]byte, 70000)}
}

func (p *pair) other(e *Endpoint) (*Endpoint, netip.AddrPort) {
	if e == p.a {
		return p.b, p.aAddr
	}
	return p.a, p.bAddr
}

// step moves time to the next event and processes it; false when nothing is left.
func (p *pair) step() bool {
	for _, e := range []*Endpoint{p.a, p.b} {
		for {
			t, ok := e.PollTransmit(p.now, p.buf)
			if !ok {
				break
			}
			if p.drop != nil && p.drop(e, p.buf[:t.N]) {
				continue
			}
			to, from := p.other(e)
			at := p.now + p.delay
			if p.extra != nil {
				at += p.extra(e, p.buf[:t.N])
			}
			if len(t.Payload) > 0 {
				p.aliased++
			}
			// The datagram: buf[:N] and, with SetPayloadAlias, the payload behind it.
			p.inflight = append(p.inflight, flight{at, to, from, append(append([]byte(nil), p.buf[:t.N]...), t.Payload...)})
		}
	}
	next := int64(-1)
	for _, f := range p.inflight {
		if next < 0 || f.at < next {
			next = f.at
		}
	}
	for _, e := range []*Endpoint{p.a, p.b} {
		if d, ok := e.NextTimeout(); ok && (next < 0 || d < next) {
			next = d
		}
	}
	if next < 0 {
		return false
	}
	if next > p.now {
		p.now = next
	}
	keep := p.inflight[:0]
	var due []flight
	for _, f := range p.inflight {
		if f.at <= p.now {
			due = append(due, f)
		} else {
			keep = append(keep, f)
		}
	}
	p.inflight = keep
	for _, f := range due {
		meta := RxMeta{From: f.from}
		if p.ecn != nil {
			sender, _ := p.other(f.to)
			meta.ECN = p.ecn(sender, f.data)
		}
		if p.dscp != nil {
			sender, _ := p.other(f.to)
			meta.DSCP = p.dscp(sender, f.data)
		}
		if p.ttl != nil {
			sender, _ := p.other(f.to)
			meta.TTL = p.ttl(sender, f.data)
		}
		f.to.HandlePacket(p.now, f.data, meta)
	}
	for _, e := range []*Endpoint{p.a, p.b} {
		if d, ok := e.NextTimeout(); ok && d <= p.now {
			e.HandleTimeout(p.now)
		}
	}
	return true
}

func (p *pair) runUntil(t testing.TB, limit int64, done func() bool) {
	t.Helper()
	for !done() {
		if !p.step() || p.now > limit {
			t.Fatalf("stalled at %d ns", p.now)
		}
	}
}

// dropData makes p lose a's data packets number k, k+every, k+2 every ... (counting from
// 1, first transmissions and resends alike); the count it returns is of the data packets
// a sent.
func dropData(p *pair, every, k int) *int {
	n := new(int)
	var pk wire.Packet
	p.drop = func(from *Endpoint, b []byte) bool {
		if from != p.a || pk.Decode(b) != nil || pk.Type != wire.TypeData {
			return false
		}
		*n++
		return *n%every == k
	}
	return n
}

// msgLog is what a pair's two sides reported: the messages b received, in order, and
// the IDs a reported sent.
type msgLog struct {
	got  [][]byte
	sent []uint32
}

// poll drains p's events into l; a message a reports failed fails t.
func (l *msgLog) poll(t testing.TB, p *pair) {
	for ev := range pending(p.b) {
		if ev.Kind == MessageReceived {
			l.got = append(l.got, ev.Data)
		}
	}
	for ev := range pending(p.a) {
		switch ev.Kind {
		case MessageSent:
			l.sent = append(l.sent, ev.MsgID)
		case MessageFailed:
			t.Fatalf("message %d failed: %v", ev.MsgID, ev.Err)
		}
	}
}

// deliverOne runs p until b received a message, by limit, and returns it; a message a
// reports failed fails t.
func deliverOne(t testing.TB, p *pair, limit int64) []byte {
	t.Helper()
	var l msgLog
	p.runUntil(t, limit, func() bool {
		l.poll(t, p)
		return len(l.got) > 0
	})
	return l.got[0]
}

// all reports whether b received n messages and a reported n sent.
func (l *msgLog) all(n int) bool { return len(l.got) == n && len(l.sent) == n }

// delivered fails t unless b received exactly msgs, in order and byte-exact.
func (l *msgLog) delivered(t testing.TB, msgs [][]byte) {
	t.Helper()
	if len(l.got) != len(msgs) {
		t.Fatalf("%d messages delivered, want %d", len(l.got), len(msgs))
	}
	for i := range msgs {
		if !bytes.Equal(l.got[i], msgs[i]) {
			t.Fatalf("message %d differs", i)
		}
	}
}

func TestPairDeliversMessages(t *testing.T) {
	p := newPair(t, DefaultConfig(), 5000)
	id, err := p.a.Dial(0, p.bAddr)
	if err != nil {
		t.Fatal(err)
	}
	msgs := [][]byte{[]byte("x"), bytes.Repeat([]byte("ab"), 5000), make([]byte, 3<<20)}
	for i := range msgs[2] {
		msgs[2][i] = byte(i * 7)
	}
	for _, m := range msgs {
		if _, err := p.a.Send(0, id, m); err != nil {
			t.Fatal(err)
		}
	}
	var l msgLog
	p.runUntil(t, 1e9, func() bool {
		l.poll(t, p)
		return l.all(len(msgs))
	})
	l.delivered(t, msgs)
	t.Logf("done at %d ns, stats a=%+v", p.now, p.a.Stats())
}

func nil2() *rand.Rand { return rand.New(rand.NewPCG(11, 12)) }

// newEndpoint returns an endpoint of cfg seeded by nil2; an error fails t.
func newEndpoint(t testing.TB, cfg Config) *Endpoint {
	t.Helper()
	e, err := NewEndpoint(cfg, nil2())
	if err != nil {
		t.Fatal(err)
	}
	return e
}
