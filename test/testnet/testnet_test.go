package testnet

import (
	"encoding/binary"
	"math"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/wire"
)

// The engine's endpoint is a Host.
var _ Host = (*transport.Endpoint)(nil)

var (
	addrA = netip.MustParseAddrPort("10.0.0.1:4000")
	addrB = netip.MustParseAddrPort("10.0.0.2:4000")
	addrC = netip.MustParseAddrPort("10.0.0.3:4000")
	addrX = netip.MustParseAddrPort("10.9.9.9:4000") // never attached
)

const (
	dataByte0 = wire.Version<<4 | byte(wire.TypeData)
	ackByte0  = wire.Version<<4 | byte(wire.TypeAck)
	seqOff    = 24 // where the fake hosts put their sequence number
)

// arrival is what a fake host records about a received datagram.
type arrival struct {
	t     int64
	seq   uint32
	n     int
	flags byte
	ecn   uint8
	dscp  uint8
	from  netip.AddrPort
}

// sender emits numbered packets to one destination and records what it receives.
type sender struct {
	to          netip.AddrPort
	size        int
	left        int    // packets still to send
	seq         uint32 // next sequence number
	ecn         uint8
	controlFrom int   // packets with seq >= controlFrom (if > 0) are sent as control
	interval    int64 // > 0: one packet per interval, paced by its own timer
	next        int64 // next departure when interval > 0
	got         []arrival
	count       int // arrivals, when got is not kept
	keep        bool
}

func newSender(to netip.AddrPort, size, n int) *sender {
	return &sender{to: to, size: size, left: n, ecn: transport.ECT0, keep: true}
}

func (s *sender) HandlePacket(now int64, b []byte, m transport.RxMeta) {
	s.count++
	if !s.keep {
		return
	}
	a := arrival{t: m.RxTime, n: len(b), ecn: m.ECN, dscp: m.DSCP, from: m.From}
	if len(b) >= seqOff+4 {
		a.seq = binary.BigEndian.Uint32(b[seqOff:])
	}
	if len(b) > 1 {
		a.flags = b[1]
	}
	if now != m.RxTime {
		panic("RxTime != now")
	}
	s.got = append(s.got, a)
}

func (s *sender) HandleTimeout(now int64) {}

func (s *sender) PollTransmit(now int64, buf []byte) (transport.Transmit, bool) {
	if s.left == 0 || (s.interval > 0 && now < s.next) {
		return transport.Transmit{}, false
	}
	s.left--
	if s.interval > 0 {
		s.next += s.interval
	}
	ctrl := s.controlFrom > 0 && int(s.seq) >= s.controlFrom
	b := buf[:s.size]
	b[0], b[1] = dataByte0, 0
	typ := wire.TypeData
	ecn := s.ecn
	if ctrl {
		b[0], typ, ecn = ackByte0, wire.TypeAck, transport.NotECT
	}
	binary.BigEndian.PutUint32(b[seqOff:], s.seq)
	s.seq++
	return transport.Transmit{N: s.size, To: s.to, ECN: ecn, Control: ctrl, Type: typ}, true
}

func (s *sender) NextTimeout() (int64, bool) {
	if s.interval > 0 && s.left > 0 {
		return s.next, true
	}
	return 0, false
}

func sink() *sender { return &sender{keep: true} }

func seqs(as []arrival) []uint32 {
	out := make([]uint32, len(as))
	for i, a := range as {
		out[i] = a.seq
	}
	return out
}

// maxDisplacement returns, over all arrivals, the largest number of packets with a higher
// sequence number that arrived before a packet, and how many packets were overtaken at all.
func maxDisplacement(as []arrival) (maxd, displaced int) {
	maxSeq := 0
	for _, a := range as {
		maxSeq = max(maxSeq, int(a.seq))
	}
	tree := make([]int, maxSeq+2) // Fenwick tree over seq+1
	seen := 0
	for _, a := range as {
		le := 0 // arrivals so far with seq <= a.seq
		for i := int(a.seq) + 1; i > 0; i -= i & -i {
			le += tree[i]
		}
		if d := seen - le; d > 0 {
			displaced++
			maxd = max(maxd, d)
		}
		for i := int(a.seq) + 1; i < len(tree); i += i & -i {
			tree[i]++
		}
		seen++
	}
	return maxd, displaced
}

func TestPropagationDelay(t *testing.T) {
	n := New(Config{Delay: 7000}, 1)
	a, b := newSender(addrB, 100, 1), sink()
	n.Attach(addrA, a, HostConfig{})
	n.Attach(addrB, b, HostConfig{Port: PortConfig{Latency: 500}})
	n.Wake(addrA)
	n.RunUntil(1e9, nil)
	if len(b.got) != 1 || b.got[0].t != 7500 || b.got[0].from != addrA || b.got[0].n != 100 || b.got[0].ecn != transport.ECT0 {
		t.Fatalf("got %+v, want one 100-byte ECT0 arrival from %v at 7500", b.got, addrA)
	}

	// NIC and port serialisation add size*8/rate each: 1250 B at 10 Gb/s = 1000 ns.
	n = New(Config{Delay: 7000}, 1)
	a, b = newSender(addrB, 1250, 1), sink()
	n.Attach(addrA, a, HostConfig{NICRate: 10e9})
	n.Attach(addrB, b, HostConfig{Port: PortConfig{Rate: 10e9, Latency: 500}})
	n.Wake(addrA)
	n.RunUntil(1e9, nil)
	if len(b.got) != 1 || b.got[0].t != 1000+1000+500+7000 {
		t.Fatalf("got %+v, want one arrival at 9500", b.got)
	}
	if s := n.Stats(); s.Sent != 1 || s.Delivered != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestNICRate(t *testing.T) {
	const N, size, rate, delay = 100, 1000, 40e9, 3000 // 200 ns per packet
	n := New(Config{Delay: delay}, 1)
	a, b := newSender(addrB, size, N), sink()
	n.Attach(addrA, a, HostConfig{NICRate: rate})
	n.Attach(addrB, b, HostConfig{})
	n.Wake(addrA)
	n.RunUntil(1e9, nil)
	if len(b.got) != N {
		t.Fatalf("%d arrivals, want %d", len(b.got), N)
	}
	for i, x := range b.got {
		if want := int64(i+1)*200 + delay; x.t != want || x.seq != uint32(i) {
			t.Fatalf("arrival %d: seq %d at %d, want seq %d at %d", i, x.seq, x.t, i, want)
		}
	}
}

func TestPortDrainRate(t *testing.T) {
	// 7 Gb/s does not divide 12000 bits evenly: the remainder must be carried.
	const N, size, delay = 1000, 1500, 1000
	const rate int64 = 7e9
	n := New(Config{Delay: delay}, 1)
	a, b := newSender(addrB, size, N), sink()
	n.Attach(addrA, a, HostConfig{})
	n.Attach(addrB, b, HostConfig{Port: PortConfig{Rate: rate}})
	n.Wake(addrA)
	n.RunUntil(1e9, nil)
	if len(b.got) != N {
		t.Fatalf("%d arrivals, want %d", len(b.got), N)
	}
	for i, x := range b.got {
		want := delay + int64(i+1)*size*8*1e9/rate
		if x.t != want || x.seq != uint32(i) {
			t.Fatalf("arrival %d: seq %d at %d, want seq %d at %d", i, x.seq, x.t, i, want)
		}
	}
	if last, want := b.got[N-1].t-delay, int64(N*size*8*1e9/rate); last != want {
		t.Fatalf("drained in %d ns, want %d", last, want)
	}
	ps := n.PortStats(addrB)
	if ps.Enqueued != N || ps.Dequeued != N || ps.Drops != 0 || ps.MaxDataBytes != (N-1)*size || ps.DataBytes != 0 {
		t.Fatalf("port stats %+v", ps)
	}
}

func TestRED(t *testing.T) {
	const N, size, kmin, kmax, runs = 200, 1000, 50_000, 150_000, 100
	// In a burst into an idle port packet 0 is dequeued at once (nothing left behind);
	// packet k > 0 leaves (N-1-k) packets behind in the data queue.
	occ := func(k int) int {
		if k == 0 {
			return 0
		}
		return (N - 1 - k) * size
	}
	// burst sends N packets of ECN codepoint ecn into the RED port at once.
	burst := func(seed uint64, ecn uint8) (*Network, *sender) {
		n := New(Config{}, seed)
		a, b := newSender(addrB, size, N), sink()
		a.ecn = ecn
		n.Attach(addrA, a, HostConfig{})
		n.Attach(addrB, b, HostConfig{Port: PortConfig{Rate: 10e9, KminBytes: kmin, KmaxBytes: kmax}})
		n.Wake(addrA)
		n.RunUntil(1e9, nil)
		return n, b
	}
	marks := make([]int, N)
	for seed := uint64(1); seed <= runs; seed++ {
		n, b := burst(seed, transport.ECT0)
		ce := 0
		for _, x := range b.got {
			switch x.ecn {
			case transport.CE:
				marks[x.seq]++
				ce++
			case transport.ECT0:
			default:
				t.Fatalf("ECN %d", x.ecn)
			}
		}
		if ps, s := n.PortStats(addrB), n.Stats(); int(ps.Marks) != ce || int(s.Marked) != ce {
			t.Fatalf("marks counted %d/%d, %d arrived CE", ps.Marks, s.Marked, ce)
		}
	}
	for k := range N {
		if o := occ(k); o <= kmin && marks[k] != 0 {
			t.Fatalf("packet %d (occupancy %d <= Kmin) marked %d times", k, o, marks[k])
		} else if o >= kmax && marks[k] != runs {
			t.Fatalf("packet %d (occupancy %d >= Kmax) marked %d/%d times", k, o, marks[k], runs)
		}
	}
	// Linear in between: compare bins of 10 packets (1000 trials each) with the mean probability.
	for lo := 1; lo < N; lo += 10 {
		got, want, cnt := 0, 0.0, 0
		for k := lo; k < lo+10 && k < N; k++ {
			o := occ(k)
			if o <= kmin || o >= kmax {
				continue
			}
			got += marks[k]
			want += float64(o-kmin) / float64(kmax-kmin) * runs
			cnt += runs
		}
		if cnt == 0 {
			continue
		}
		if d := math.Abs(float64(got)-want) / float64(cnt); d > 0.05 {
			t.Errorf("packets %d..%d: marked %d, expected %.0f of %d", lo, lo+9, got, want, cnt)
		}
	}

	// Not-ECT packets are never marked; ECT(1) is.
	for _, ecn := range []uint8{transport.NotECT, transport.ECT1} {
		n, b := burst(1, ecn)
		ce := 0
		for _, x := range b.got {
			if x.ecn == transport.CE {
				ce++
			} else if x.ecn != ecn {
				t.Fatalf("ECN changed from %d to %d", ecn, x.ecn)
			}
		}
		if ecn == transport.NotECT && (ce != 0 || n.Stats().Marked != 0) {
			t.Fatalf("%d not-ECT packets marked", ce)
		}
		if ecn == transport.ECT1 && ce < 50 {
			t.Fatalf("only %d ECT(1) packets marked", ce)
		}
	}
}

func TestTrim(t *testing.T) {
	const N, size = 30, 1500
	n := New(Config{TrimDSCP: 46, Delay: 1000}, 1)
	a, b := newSender(addrB, size, N), sink()
	n.Attach(addrA, a, HostConfig{})
	n.Attach(addrB, b, HostConfig{Port: PortConfig{Rate: 10e9, BufferBytes: 10 * size, ControlBytes: 5 * wire.DataHdrLen, Trim: true}})
	n.Wake(addrA)
	n.RunUntil(1e9, nil)
	// Packet 0 is serialised at once, 1..10 fill the data queue, 11..15 are trimmed into
	// the control queue (5 headers), 16..29 find it full and are dropped. The headers
	// overtake the queued data.
	want := []uint32{0, 11, 12, 13, 14, 15, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if got := seqs(b.got); !reflect.DeepEqual(got, want) {
		t.Fatalf("arrival order %v, want %v", got, want)
	}
	for _, x := range b.got {
		trimmed := x.seq >= 11
		if trimmed != (x.flags&byte(wire.FlagTrimmed) != 0) {
			t.Fatalf("seq %d: flags %#x", x.seq, x.flags)
		}
		if trimmed && (x.n != wire.DataHdrLen || x.dscp != 46) || !trimmed && (x.n != size || x.dscp != 0) {
			t.Fatalf("seq %d: %d bytes, DSCP %d", x.seq, x.n, x.dscp)
		}
	}
	ps, s := n.PortStats(addrB), n.Stats()
	if ps.Trims != 5 || ps.Drops != 14 || ps.Enqueued != 16 || ps.Dequeued != 16 || ps.MaxDataBytes != 10*size || ps.MaxControlBytes != 5*wire.DataHdrLen {
		t.Fatalf("port stats %+v", ps)
	}
	if s.Trimmed != 5 || s.Dropped != 14 || s.Delivered != 16 || s.Sent != N {
		t.Fatalf("stats %+v", s)
	}
	// Timing: packet 0 at 1200 ns, then five 64-byte headers at 51.2 ns each.
	if b.got[0].t != 1000+1200 || b.got[5].t != 1000+1200+256 {
		t.Fatalf("arrival times %d, %d", b.got[0].t, b.got[5].t)
	}
}

func TestDropTail(t *testing.T) {
	const N, size = 30, 1500
	n := New(Config{TrimDSCP: 46}, 1)
	a, b := newSender(addrB, size, N), sink()
	n.Attach(addrA, a, HostConfig{})
	n.Attach(addrB, b, HostConfig{Port: PortConfig{Rate: 10e9, BufferBytes: 10 * size, ControlBytes: 5 * wire.DataHdrLen}})
	n.Wake(addrA)
	n.RunUntil(1e9, nil)
	want := []uint32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if got := seqs(b.got); !reflect.DeepEqual(got, want) {
		t.Fatalf("arrival order %v, want %v", got, want)
	}
	for _, x := range b.got {
		if x.n != size || x.flags != 0 || x.dscp != 0 {
			t.Fatalf("seq %d altered: %+v", x.seq, x)
		}
	}
	if ps := n.PortStats(addrB); ps.Drops != 19 || ps.Trims != 0 {
		t.Fatalf("port stats %+v", ps)
	}
}

func TestControlPriority(t *testing.T) {
	n := New(Config{}, 1)
	a, b := newSender(addrB, 1000, 13), sink()
	a.controlFrom = 10 // 0..9 data, 10..12 control
	n.Attach(addrA, a, HostConfig{})
	n.Attach(addrB, b, HostConfig{Port: PortConfig{Rate: 10e9, KminBytes: 0, KmaxBytes: 1}})
	n.Wake(addrA)
	n.RunUntil(1e9, nil)
	want := []uint32{0, 10, 11, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	if got := seqs(b.got); !reflect.DeepEqual(got, want) {
		t.Fatalf("arrival order %v, want %v", got, want)
	}
	for _, x := range b.got {
		if x.seq >= 10 && x.ecn != transport.NotECT {
			t.Fatalf("control packet %d has ECN %d", x.seq, x.ecn)
		}
	}
}

func TestLossDup(t *testing.T) {
	const N = 100_000
	n := New(Config{Delay: 100, Loss: 0.1, Dup: 0.05}, 7)
	a, b := newSender(addrB, 64, N), sink()
	n.Attach(addrA, a, HostConfig{})
	n.Attach(addrB, b, HostConfig{})
	n.Wake(addrA)
	n.RunUntil(1e9, nil)
	s := n.Stats()
	within := func(name string, got uint64, mean, sd float64) {
		if math.Abs(float64(got)-mean) > 5*sd {
			t.Errorf("%s = %d, want %.0f ± %.0f", name, got, mean, 5*sd)
		}
	}
	within("lost", s.Lost, N*0.1, math.Sqrt(N*0.1*0.9))
	kept := float64(N - s.Lost)
	within("duplicated", s.Duplicated, kept*0.05, math.Sqrt(kept*0.05*0.95))
	if s.Sent != N || s.Delivered != N-s.Lost+s.Duplicated || len(b.got) != int(s.Delivered) {
		t.Fatalf("stats %+v, %d arrivals", s, len(b.got))
	}
	copies := make([]int, N)
	for _, x := range b.got {
		copies[x.seq]++
	}
	var zero, two uint64
	for _, c := range copies {
		switch c {
		case 0:
			zero++
		case 2:
			two++
		case 1:
		default:
			t.Fatalf("%d copies", c)
		}
	}
	if zero != s.Lost || two != s.Duplicated {
		t.Fatalf("%d missing, %d doubled; stats %+v", zero, two, s)
	}

	// LossFilter restricts loss to the packets it accepts.
	n = New(Config{Loss: 1, LossFilter: func(b []byte) bool { return binary.BigEndian.Uint32(b[seqOff:])%10 == 0 }}, 7)
	a, b = newSender(addrB, 64, 1000), sink()
	n.Attach(addrA, a, HostConfig{})
	n.Attach(addrB, b, HostConfig{})
	n.Wake(addrA)
	n.RunUntil(1e9, nil)
	if len(b.got) != 900 || n.Stats().Lost != 100 {
		t.Fatalf("%d arrivals, stats %+v", len(b.got), n.Stats())
	}
	for _, x := range b.got {
		if x.seq%10 == 0 {
			t.Fatalf("seq %d not lost", x.seq)
		}
	}
}

func TestReorderTime(t *testing.T) {
	// 1250 B at 100 Gb/s: one packet every 100 ns, so ReorderDelay 1000 ns = 10 packets deep.
	const N, depth = 20_000, 10
	n := New(Config{Delay: 2000, ReorderProb: 0.05, ReorderDelay: depth * 100}, 3)
	a, b := newSender(addrB, 1250, N), sink()
	n.Attach(addrA, a, HostConfig{NICRate: 100e9})
	n.Attach(addrB, b, HostConfig{})
	n.Wake(addrA)
	n.RunUntil(1e9, nil)
	if len(b.got) != N {
		t.Fatalf("%d arrivals", len(b.got))
	}
	maxd, displaced := maxDisplacement(b.got)
	t.Logf("reordered %d, displaced %d, max displacement %d", n.Stats().Reordered, displaced, maxd)
	if maxd > depth || maxd < depth-2 || displaced < 500 {
		t.Fatalf("max displacement %d (bound %d), %d packets displaced", maxd, depth, displaced)
	}
	if r := n.Stats().Reordered; math.Abs(float64(r)-N*0.05) > 5*math.Sqrt(N*0.05) {
		t.Fatalf("reordered %d", r)
	}
}

func TestReorderDepth(t *testing.T) {
	const N, depth = 100_000, 100
	for _, nic := range []int64{0, 100e9} {
		n := New(Config{Delay: 2000, ReorderProb: 0.01, ReorderDepth: depth}, 5)
		a, b := newSender(addrB, 64, N), sink()
		n.Attach(addrA, a, HostConfig{NICRate: nic})
		n.Attach(addrB, b, HostConfig{Port: PortConfig{Rate: 400e9}})
		n.Wake(addrA)
		n.RunUntil(1e10, nil)
		if len(b.got) != N {
			t.Fatalf("%d arrivals", len(b.got))
		}
		maxd, displaced := maxDisplacement(b.got)
		t.Logf("NIC %v: reordered %d, displaced %d, max displacement %d", nic, n.Stats().Reordered, displaced, maxd)
		if maxd > depth || maxd < depth-5 || displaced < 500 {
			t.Fatalf("max displacement %d (bound %d), %d displaced", maxd, depth, displaced)
		}
	}

	// A held packet with no followers is released by the timeout.
	n := New(Config{Delay: 2000, ReorderProb: 1, ReorderDepth: 5, ReorderTimeout: 50_000}, 5)
	a, b := newSender(addrB, 64, 1), sink()
	n.Attach(addrA, a, HostConfig{})
	n.Attach(addrB, b, HostConfig{})
	n.Wake(addrA)
	n.RunUntil(1e9, nil)
	if len(b.got) != 1 || b.got[0].t != 52_000 {
		t.Fatalf("arrivals %+v, want one at 52000", b.got)
	}

	// Exactly k: a lone held packet is overtaken by k packets, k in [1, depth].
	hist := make(map[int]int)
	for seed := uint64(0); seed < 200; seed++ {
		n := New(Config{ReorderProb: 0.001, ReorderDepth: 3}, seed)
		a, b := newSender(addrB, 64, 2000), sink()
		n.Attach(addrA, a, HostConfig{})
		n.Attach(addrB, b, HostConfig{})
		n.Wake(addrA)
		n.RunUntil(1e9, nil)
		if n.Stats().Reordered != 1 {
			continue
		}
		d, _ := maxDisplacement(b.got)
		hist[d]++
	}
	if len(hist) != 3 || hist[1] == 0 || hist[2] == 0 || hist[3] == 0 {
		t.Fatalf("displacements of lone held packets: %v, want 1..3", hist)
	}
}

// scenario runs two senders into one sink through every impairment and returns the sink's
// arrivals and the counters.
func scenario(seed uint64) ([]arrival, Stats, PortStats) {
	n := New(Config{Delay: 1500, Loss: 0.01, Dup: 0.01, ReorderProb: 0.02, ReorderDelay: 3000, TrimDSCP: 9}, seed)
	a, c, b := newSender(addrB, 1500, 3000), newSender(addrB, 700, 3000), sink()
	c.interval = 150
	n.Attach(addrA, a, HostConfig{NICRate: 100e9})
	n.Attach(addrC, c, HostConfig{})
	n.Attach(addrB, b, HostConfig{Port: PortConfig{Rate: 100e9, BufferBytes: 60_000, ControlBytes: 4096, KminBytes: 10_000, KmaxBytes: 40_000, Trim: true}})
	n.Wake(addrA)
	n.Wake(addrC)
	n.RunUntil(1e9, nil)
	return b.got, n.Stats(), n.PortStats(addrB)
}

func TestDeterminism(t *testing.T) {
	a1, s1, p1 := scenario(42)
	a2, s2, p2 := scenario(42)
	if !reflect.DeepEqual(a1, a2) || s1 != s2 || p1 != p2 {
		t.Fatalf("same seed, different runs:\n%+v\n%+v\n%+v\n%+v", s1, s2, p1, p2)
	}
	if s1.Lost == 0 || s1.Duplicated == 0 || s1.Reordered == 0 || s1.Marked == 0 || s1.Trimmed == 0 {
		t.Fatalf("scenario does not exercise every impairment: %+v", s1)
	}
	a3, s3, _ := scenario(43)
	if reflect.DeepEqual(a1, a3) || s1 == s3 {
		t.Fatalf("different seeds gave identical runs")
	}
}

// ticker wants a timeout every period, forever; want, if set, overrides it.
type ticker struct {
	period int64
	next   int64
	fired  []int64
	want   int64 // > 0: the only timeout wanted (cleared when it fires)
	manual bool
}

func (k *ticker) HandlePacket(int64, []byte, transport.RxMeta) {}
func (k *ticker) PollTransmit(int64, []byte) (transport.Transmit, bool) {
	return transport.Transmit{}, false
}
func (k *ticker) HandleTimeout(now int64) {
	if t, ok := k.NextTimeout(); !ok || t > now {
		panic("HandleTimeout before the timeout")
	}
	k.fired = append(k.fired, now)
	if k.manual {
		k.want = 0
	} else {
		k.next += k.period
	}
}
func (k *ticker) NextTimeout() (int64, bool) {
	if k.manual {
		return k.want, k.want > 0
	}
	return k.next, true
}

func TestRunUntil(t *testing.T) {
	n := New(Config{}, 1)
	k := &ticker{period: 1000, next: 1000}
	n.Attach(addrA, k, HostConfig{})
	n.Wake(addrA)
	if n.RunUntil(1_000_000, nil) {
		t.Fatal("RunUntil with nil done reported done")
	}
	if n.Now() != 1_000_000 || len(k.fired) != 1000 || k.fired[999] != 1_000_000 {
		t.Fatalf("now %d, %d ticks, last %d", n.Now(), len(k.fired), k.fired[len(k.fired)-1])
	}
	if !n.RunUntil(2_000_000, func() bool { return len(k.fired) == 1005 }) {
		t.Fatal("done not reported")
	}
	if n.Now() != 1_005_000 {
		t.Fatalf("stopped at %d, want 1005000", n.Now())
	}
	if !n.RunUntil(2_000_000, func() bool { return true }) || n.Now() != 1_005_000 {
		t.Fatal("done holding at once must not advance time")
	}
	// Deadline in between events: the clock stops at the deadline, the next event stays.
	n.RunUntil(1_005_500, nil)
	if n.Now() != 1_005_500 || len(k.fired) != 1005 {
		t.Fatalf("now %d, %d ticks", n.Now(), len(k.fired))
	}
	// Nothing to do: time still advances to the deadline.
	e := New(Config{}, 1)
	if e.RunUntil(5000, nil) || e.Now() != 5000 || e.Step() {
		t.Fatal("empty network")
	}
}

func TestTimerRearm(t *testing.T) {
	n := New(Config{}, 1)
	k := &ticker{manual: true}
	n.Attach(addrA, k, HostConfig{})
	set := func(at int64) { k.want = at; n.Wake(addrA) }

	set(5000)
	n.RunUntil(2000, nil)
	set(8000) // later: the pending event fires early at 5000 and re-arms
	n.RunUntil(20_000, nil)
	set(30_000)
	set(25_000) // earlier: a new event, the 30000 one goes stale
	n.RunUntil(40_000, nil)
	set(45_000)
	k.want = 0 // the host stops wanting it without telling: the event must do nothing
	n.RunUntil(50_000, nil)
	if want := []int64{8000, 25_000}; !reflect.DeepEqual(k.fired, want) {
		t.Fatalf("fired at %v, want %v", k.fired, want)
	}
	// A time in the past fires now.
	set(10)
	n.Step()
	if k.fired[len(k.fired)-1] != 50_000 {
		t.Fatalf("fired at %v", k.fired)
	}
}

func TestWakeAndUndeliverable(t *testing.T) {
	n := New(Config{Delay: 300}, 1)
	a, b := newSender(addrB, 100, 0), sink()
	n.Attach(addrA, a, HostConfig{})
	n.Attach(addrB, b, HostConfig{})
	n.RunUntil(10_000, nil)
	a.left = 3 // the test "sends" three packets
	n.Wake(addrA)
	n.RunUntil(20_000, nil)
	if len(b.got) != 3 || b.got[0].t != 10_300 {
		t.Fatalf("arrivals %+v", b.got)
	}
	a.to, a.left = addrX, 2
	n.Wake(addrA)
	n.RunUntil(30_000, nil)
	if s := n.Stats(); s.Undeliverable != 2 || s.Sent != 5 || s.Delivered != 3 {
		t.Fatalf("stats %+v", s)
	}
}

func TestReply(t *testing.T) {
	// Hosts talk both ways: a delivered packet makes the receiver poll and answer.
	n := New(Config{Delay: 1000}, 1)
	a, e := newSender(addrB, 100, 1), &echo{}
	n.Attach(addrA, a, HostConfig{})
	n.Attach(addrB, e, HostConfig{Port: PortConfig{Rate: 8e9}})
	n.Wake(addrA)
	n.RunUntil(1e6, nil)
	// 100 B at 8 Gb/s = 100 ns through B's port, 1000 ns each way.
	if len(a.got) != 1 || a.got[0].t != 2100 || a.got[0].from != addrB || a.got[0].seq != 0 {
		t.Fatalf("replies %+v", a.got)
	}
}

// echo returns every packet it receives to its sender.
type echo struct {
	buf  [256]byte
	n    int
	to   netip.AddrPort
	have bool
}

func (e *echo) HandlePacket(now int64, b []byte, m transport.RxMeta) {
	e.n = copy(e.buf[:], b)
	e.to, e.have = m.From, true
}
func (e *echo) HandleTimeout(int64) {}
func (e *echo) PollTransmit(now int64, buf []byte) (transport.Transmit, bool) {
	if !e.have {
		return transport.Transmit{}, false
	}
	e.have = false
	return transport.Transmit{N: copy(buf, e.buf[:e.n]), To: e.to, Control: true, Type: wire.TypeAck}, true
}
func (e *echo) NextTimeout() (int64, bool) { return 0, false }

func TestSamples(t *testing.T) {
	// 11 packets of 1250 B at 10 Gb/s (1000 ns each): at time t the data queue holds
	// 10 - floor(t/1000) packets.
	n := New(Config{}, 1)
	a, b := newSender(addrB, 1250, 11), sink()
	n.Attach(addrA, a, HostConfig{})
	n.Attach(addrB, b, HostConfig{Port: PortConfig{Rate: 10e9, SampleInterval: 500, SampleCap: 30}})
	n.Wake(addrA)
	n.RunUntil(20_000, nil)
	s := n.Samples(addrB)
	if len(s) != 30 {
		t.Fatalf("%d samples, want 30 (capacity)", len(s))
	}
	for i, x := range s {
		want := max(0, 10-int(x.Time/1000)) * 1250
		if x.Time != int64(i)*500 || x.Data != want || x.Control != 0 {
			t.Fatalf("sample %d = %+v, want data %d at %d", i, x, want, i*500)
		}
	}
}

// newForward builds the benchmark topology: one sender at 100 Gb/s into a 100 Gb/s port.
func newForward(cfg Config, pc PortConfig, count int) (*Network, *sender, *sender) {
	n := New(cfg, 1)
	a, b := newSender(addrB, 1500, count), sink()
	b.keep = false
	n.Attach(addrA, a, HostConfig{NICRate: 100e9})
	n.Attach(addrB, b, HostConfig{Port: pc})
	n.Wake(addrA)
	return n, a, b
}

func TestSteadyStateAllocs(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		pc   PortConfig
	}{
		{"plain", Config{Delay: 1000}, PortConfig{Rate: 100e9}},
		{"impaired", Config{Delay: 1000, Loss: 0.01, Dup: 0.01, ReorderProb: 0.05, ReorderDelay: 2000},
			PortConfig{Rate: 90e9, BufferBytes: 100_000, ControlBytes: 10_000, KminBytes: 10_000, KmaxBytes: 50_000, Trim: true, SampleInterval: 1000}},
		{"depth", Config{Delay: 1000, ReorderProb: 0.05, ReorderDepth: 50},
			PortConfig{Rate: 90e9, BufferBytes: 100_000, KminBytes: 10_000, KmaxBytes: 50_000}},
	}
	for _, c := range cases {
		n, _, b := newForward(c.cfg, c.pc, -1) // sends forever
		n.RunUntil(2_000_000, nil)             // warm up the pools and the heap
		before := b.count
		allocs := testing.AllocsPerRun(100, func() { n.RunUntil(n.Now()+20_000, nil) })
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per run", c.name, allocs)
		}
		if b.count-before < 100*100 {
			t.Errorf("%s: only %d packets forwarded", c.name, b.count-before)
		}
	}
}

func BenchmarkNetworkForward(b *testing.B) {
	n, a, s := newForward(Config{Delay: 1000}, PortConfig{Rate: 100e9, BufferBytes: 1 << 20, KminBytes: 100_000, KmaxBytes: 400_000}, 10_000)
	n.RunUntil(1e9, nil) // warm up: all 10000 delivered, pools filled
	a.left = b.N
	n.Wake(addrA)
	target := s.count + b.N
	done := func() bool { return s.count >= target }
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	n.RunUntil(math.MaxInt64, done)
	el := time.Since(start)
	b.StopTimer()
	if s.count != target {
		b.Fatalf("forwarded %d of %d", s.count-(target-b.N), b.N)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "pkts/s")
}

func TestOverheadAndSetConfig(t *testing.T) {
	// 750 B + 250 B overhead at 40 Gb/s = 200 ns per packet through the NIC and the port.
	n := New(Config{Overhead: 250, Loss: 1}, 1)
	a, b := newSender(addrB, 750, 5), sink()
	n.Attach(addrA, a, HostConfig{NICRate: 40e9})
	n.Attach(addrB, b, HostConfig{Port: PortConfig{Rate: 40e9}})
	n.Wake(addrA)
	n.RunUntil(10_000, nil)
	if len(b.got) != 0 || n.Stats().Lost != 5 {
		t.Fatalf("loss 1: %d arrivals, stats %+v", len(b.got), n.Stats())
	}
	cfg := n.Config()
	cfg.Loss = 0
	n.SetConfig(cfg)
	a.left = 3
	n.Wake(addrA)
	n.RunUntil(20_000, nil)
	if len(b.got) != 3 || b.got[0].t != 10_400 || b.got[2].t != 10_800 {
		t.Fatalf("arrivals %+v", b.got)
	}
}

// dueHost has datagrams to send and reports its timeout as due until it sent them
// (as an endpoint with a pending ACK does) but does nothing in HandleTimeout.
type dueHost struct{ left int }

func (h *dueHost) HandlePacket(int64, []byte, transport.RxMeta) {}
func (h *dueHost) HandleTimeout(int64)                          {}
func (h *dueHost) NextTimeout() (int64, bool)                   { return 0, h.left > 0 }
func (h *dueHost) PollTransmit(now int64, buf []byte) (transport.Transmit, bool) {
	if h.left == 0 {
		return transport.Transmit{}, false
	}
	h.left--
	return transport.Transmit{N: 100, To: netip.MustParseAddrPort("10.9.9.2:1")}, true
}

// A host whose timeout stays due while its busy NIC holds what it must send must not
// make the network fire its timer forever at one instant: time advances, the NIC drains.
func TestDueTimeoutWhileNICBusy(t *testing.T) {
	n := New(Config{}, 1)
	h := &dueHost{left: 5}
	n.Attach(netip.MustParseAddrPort("10.9.9.1:1"), h, HostConfig{NICRate: 1e9})
	n.Attach(netip.MustParseAddrPort("10.9.9.2:1"), &dueHost{}, HostConfig{})
	n.Wake(netip.MustParseAddrPort("10.9.9.1:1"))
	steps := 0
	ok := n.RunUntil(1_000_000, func() bool { steps++; return h.left == 0 || steps > 10_000 })
	if !ok || h.left != 0 || steps > 10_000 {
		t.Fatalf("left %d after %d events at %d ns", h.left, steps, n.Now())
	}
}
