package testnet

import (
	"encoding/binary"
	"testing"

	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/wire"
)

// evSender emits numbered DATA packets whose EVs evOf chooses.
type evSender struct {
	size int
	left int
	seq  uint32
	evOf func(seq uint32) uint16
}

func (s *evSender) HandlePacket(int64, []byte, transport.RxMeta) {}
func (s *evSender) HandleTimeout(int64)                          {}
func (s *evSender) NextTimeout() (int64, bool)                   { return 0, false }
func (s *evSender) PollTransmit(now int64, buf []byte) (transport.Transmit, bool) {
	if s.left == 0 {
		return transport.Transmit{}, false
	}
	s.left--
	b := buf[:s.size]
	b[0], b[1] = dataByte0, 0
	binary.BigEndian.PutUint32(b[seqOff:], s.seq)
	ev := s.evOf(s.seq)
	s.seq++
	return transport.Transmit{N: s.size, To: addrB, EV: ev, ECN: transport.ECT0, Type: wire.TypeData}, true
}

// pathsNet attaches an evSender at A (NIC at nic bits/s) and a sink at B behind paths.
func pathsNet(nic int64, paths []PathConfig, n int, evOf func(uint32) uint16) (*Network, *sender) {
	net := New(Config{Delay: 1_000}, 1)
	net.Attach(addrA, &evSender{size: 1000, left: n, evOf: evOf}, HostConfig{NICRate: nic})
	b := sink()
	net.Attach(addrB, b, HostConfig{Port: PortConfig{Rate: 100e9}, Paths: paths})
	return net, b
}

// evsOn returns k EVs that the hash sends down path i from A to B.
func evsOn(t *testing.T, net *Network, i, k int) []uint16 {
	t.Helper()
	var out []uint16
	for ev := 0; ev < 1<<16 && len(out) < k; ev++ {
		if net.PathOf(addrA, addrB, uint16(ev)) == i {
			out = append(out, uint16(ev))
		}
	}
	if len(out) < k {
		t.Fatalf("only %d EVs map to path %d", len(out), i)
	}
	return out
}

func TestPathsSelectedByEVHash(t *testing.T) {
	paths := make([]PathConfig, 4)
	net, b := pathsNet(100e9, paths, 4096, func(s uint32) uint16 { return uint16(s % 256) })
	want := make([]uint64, 4)
	for ev := range 256 {
		i := net.PathOf(addrA, addrB, uint16(ev))
		if i < 0 || i >= 4 {
			t.Fatalf("PathOf = %d", i)
		}
		want[i] += 16
	}
	net.Wake(addrA)
	net.RunUntil(1e9, nil)
	if len(b.got) != 4096 {
		t.Fatalf("%d of 4096 delivered", len(b.got))
	}
	for i := range 4 {
		s := net.PathStats(addrB, i)
		if s.Packets != want[i] || s.Bytes != want[i]*1000 {
			t.Errorf("path %d: %d packets, hash says %d", i, s.Packets, want[i])
		}
		if want[i] < 4096/4*7/10 {
			t.Errorf("path %d gets only %d of 4096: poor hash spread", i, want[i])
		}
	}
	// The hash covers the addresses too: another source spreads the same EVs differently.
	other := 0
	for ev := range 256 {
		if net.PathOf(addrC, addrB, uint16(ev)) != net.PathOf(addrA, addrB, uint16(ev)) {
			other++
		}
	}
	if other < 128 {
		t.Fatalf("source address changes the path of only %d of 256 EVs", other)
	}
	if net.PathOf(addrB, addrA, 1) != -1 || net.NumPaths(addrA) != 0 || net.NumPaths(addrB) != 4 {
		t.Fatal("paths toward A")
	}
}

func TestPathRatesQueuesAndDegrade(t *testing.T) {
	// Two paths at 10 and 20 Gbit/s behind a 100 Gbit/s NIC, alternating packets: each
	// path drains at its own rate.
	paths := []PathConfig{{Port: PortConfig{Rate: 10e9}}, {Port: PortConfig{Rate: 20e9}}}
	net, b := pathsNet(100e9, paths, 2000, nil)
	ev := [2]uint16{evsOn(t, net, 0, 1)[0], evsOn(t, net, 1, 1)[0]}
	net.hosts[0].h.(*evSender).evOf = func(s uint32) uint16 { return ev[s%2] }
	net.Wake(addrA)
	net.RunUntil(1e9, nil)
	var last [2]int64
	for _, a := range b.got {
		last[a.seq%2] = a.t
	}
	// 1000 packets of 1000 bytes: 800 us at 10 Gbit/s, 400 us at 20.
	if last[0] < 800_000 || last[0] > 805_000 || last[1] < 400_000 || last[1] > 405_000 {
		t.Fatalf("paths drained at %d and %d ns, want ~800us and ~400us", last[0], last[1])
	}
	if s := net.PathStats(addrB, 0); s.MaxDataBytes < 400_000 || s.Dequeued != 1000 {
		t.Fatalf("slow path stats %+v", s)
	}

	// Degrade: the 20 Gbit/s path drops to 5 from 100 us on.
	paths = []PathConfig{{Port: PortConfig{Rate: 20e9}, DegradeAt: 100_000, DegradedRate: 5e9}}
	net = New(Config{}, 1)
	s := &evSender{size: 1000, left: 1000, evOf: func(uint32) uint16 { return 0 }}
	net.Attach(addrA, s, HostConfig{NICRate: 8e9}) // one packet per us: below both rates
	bb := sink()
	net.Attach(addrB, bb, HostConfig{Paths: paths})
	net.Wake(addrA)
	net.RunUntil(1e9, nil)
	end := bb.got[len(bb.got)-1].t
	// ~100 packets before 100 us; the other ~900 drain at 5 Gbit/s (1.6 us each).
	if end < 1_500_000 || end > 1_560_000 {
		t.Fatalf("degraded path finished at %d ns, want ~1.54 ms", end)
	}
}

func TestPathFailureDropsEverythingUntilRecovery(t *testing.T) {
	// Path 0 fails at 100 us and recovers at 300 us; path 1 stays up. One packet per us
	// alternates between them; path 0 is slow enough to hold a queue when it fails.
	paths := []PathConfig{{Port: PortConfig{Rate: 3e9}, FailAt: 100_000, RecoverAt: 300_000}, {}}
	net, b := pathsNet(8e9, paths, 1000, nil)
	ev := [2]uint16{evsOn(t, net, 0, 1)[0], evsOn(t, net, 1, 1)[0]}
	net.hosts[0].h.(*evSender).evOf = func(s uint32) uint16 { return ev[s%2] }
	net.Wake(addrA)
	net.RunUntil(1e9, nil)
	got := [2]int{}
	for _, a := range b.got {
		got[a.seq%2]++
		if a.seq%2 == 0 && a.t >= 102_000 && a.t < 300_000 { // 1 us delay + egress after the path
			t.Fatalf("packet %d crossed the failed path at %d ns", a.seq, a.t)
		}
	}
	s0 := net.PathStats(addrB, 0)
	if got[1] != 500 || s0.Packets != 500 || int(s0.FailDrops)+got[0] != 500 {
		t.Fatalf("delivered %v, path 0 %+v", got, s0)
	}
	// ~100 packets reached path 0 in the 200 us of failure, plus those it had queued.
	if s0.FailDrops < 105 || s0.FailDrops > 130 || net.Stats().FailDropped != s0.FailDrops {
		t.Fatalf("%d fail drops (network: %d)", s0.FailDrops, net.Stats().FailDropped)
	}
}

func TestPathTrimAndMark(t *testing.T) {
	// A burst into a path with a small trimming buffer and RED: trimmed headers and
	// marked packets come out of the egress port.
	paths := []PathConfig{{Port: PortConfig{Rate: 10e9, BufferBytes: 20_000, Trim: true, KminBytes: 2_000, KmaxBytes: 10_000}}}
	net, b := pathsNet(0, paths, 100, func(uint32) uint16 { return 9 })
	net.Wake(addrA)
	net.RunUntil(1e9, nil)
	trimmed, marked := 0, 0
	for _, a := range b.got {
		if a.flags&byte(wire.FlagTrimmed) != 0 {
			trimmed++
			if a.n != wire.DataHdrLen {
				t.Fatalf("trimmed packet of %d bytes", a.n)
			}
		}
		if a.ecn == transport.CE {
			marked++
		}
	}
	s := net.PathStats(addrB, 0)
	if len(b.got) != 100 || trimmed != int(s.Trims) || trimmed < 70 || marked == 0 || int(s.Marks) != marked {
		t.Fatalf("%d delivered, %d trimmed, %d marked; path %+v", len(b.got), trimmed, marked, s)
	}
	// Trimmed headers overtook the queued data at the path: the first arrivals are headers.
	if b.got[0].flags&byte(wire.FlagTrimmed) == 0 && b.got[1].flags&byte(wire.FlagTrimmed) == 0 {
		t.Fatal("trimmed headers did not get priority")
	}
}

func TestPathsSteadyStateAllocs(t *testing.T) {
	paths := []PathConfig{
		{Port: PortConfig{Rate: 30e9, BufferBytes: 50_000, KminBytes: 5_000, KmaxBytes: 40_000, Trim: true, Latency: 500}},
		{Port: PortConfig{Rate: 20e9, BufferBytes: 50_000, Latency: 500}, DegradeAt: 1_000_000, DegradedRate: 10e9},
		{Port: PortConfig{Rate: 30e9, BufferBytes: 50_000, SampleInterval: 1000}, FailAt: 1_500_000},
		{},
	}
	net, b := pathsNet(100e9, paths, -1, func(s uint32) uint16 { return uint16(s * 7919) })
	b.keep = false
	net.Wake(addrA)
	net.RunUntil(2_000_000, nil)
	before := b.count
	allocs := testing.AllocsPerRun(100, func() { net.RunUntil(net.Now()+20_000, nil) })
	if allocs != 0 {
		t.Errorf("%.1f allocations per run", allocs)
	}
	if b.count-before < 100*100 {
		t.Errorf("only %d packets forwarded", b.count-before)
	}
}
