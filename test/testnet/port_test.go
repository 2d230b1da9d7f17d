package testnet

import (
	"testing"

	"github.com/smartt-transport/smartt/test/switchport"
	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/wire"
)

// TestPortIsSwitchport: a testnet egress port behaves exactly as a test/switchport.Port
// (the simulator's queue model) given the same arrivals and seed: every packet arrives
// at its departure end plus Latency and Delay, CE-marked and trimmed as the port decided,
// and the port's counters agree. The load covers the RED ramp, full marking and trimming.
func TestPortIsSwitchport(t *testing.T) {
	const (
		size, pkts, gap       = 1500, 80, 400 // 1500 B every 400 ns into a 10 Gbit/s port
		delay, latency        = 1000, 300
		seed, trimDSCP        = 7, 5
		buf, kmin, kmax       = 20 * size, 2 * size, 15 * size
		rate            int64 = 10e9
	)
	n := New(Config{Delay: delay, TrimDSCP: trimDSCP}, seed)
	a, b := newSender(addrB, size, pkts), sink()
	a.interval = gap
	n.Attach(addrA, a, HostConfig{})
	n.Attach(addrB, b, HostConfig{Port: PortConfig{Rate: rate, BufferBytes: buf, ControlBytes: 8 * wire.DataHdrLen,
		KminBytes: kmin, KmaxBytes: kmax, Trim: true, Latency: latency}})
	n.Wake(addrA)
	n.RunUntil(1e9, nil)

	ref, err := switchport.New[int](switchport.Config{Rate: rate, DataBytes: buf, ControlBytes: 8 * wire.DataHdrLen,
		KminBytes: kmin, KmaxBytes: kmax, Trim: true, TrimBytes: wire.DataHdrLen}, portSeed(seed, 1, -1))
	if err != nil {
		t.Fatal(err)
	}
	var want []arrival
	collect := func() {
		for d, ok := ref.Pop(); ok; d, ok = ref.Pop() {
			w := arrival{t: d.End + latency + delay, seq: uint32(d.Item), n: d.Size, ecn: transport.ECT0, from: addrA}
			if d.Marked {
				w.ecn = transport.CE
			}
			if d.Trimmed {
				w.flags, w.dscp = byte(wire.FlagTrimmed), trimDSCP
			}
			want = append(want, w)
		}
	}
	for i := 0; i < pkts; i++ {
		if v := ref.Arrive(int64(i)*gap, i, size, true, true); v != switchport.Dropped {
			collect()
		}
	}
	ref.Advance(1e9)
	collect()

	rs := ref.Stats()
	if rs.Marks == 0 || rs.Marks == uint64(len(want)) || rs.Trims == 0 {
		t.Fatalf("load does not exercise the model: %d marks, %d trims of %d", rs.Marks, rs.Trims, len(want))
	}
	if len(b.got) != len(want) {
		t.Fatalf("%d arrivals, the switchport model delivers %d", len(b.got), len(want))
	}
	for i, w := range want {
		if g := b.got[i]; g != w {
			t.Fatalf("arrival %d: %+v, the switchport model gives %+v", i, g, w)
		}
	}
	ps := n.PortStats(addrB)
	wantPS := PortStats{Enqueued: rs.Enqueued, Dequeued: rs.Dequeued, Drops: rs.Drops, Trims: rs.Trims, Marks: rs.Marks,
		MaxDataBytes: rs.MaxDataBytes, MaxControlBytes: rs.MaxControlBytes}
	if ps != wantPS {
		t.Errorf("port stats %+v, the switchport model's %+v", ps, wantPS)
	}
}
