package daemon

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/smartt-transport/smartt/transport"
	"github.com/smartt-transport/smartt/transport/seal"
)

// ringSocket is a zero-allocation in-memory socket for measuring the node's own path:
// writes copy into the peer's preallocated slots; reads never block (drivers poll).
type ringSocket struct {
	addr       netip.AddrPort
	peer       *ringSocket
	slot       [][]byte
	n          []int
	from       []netip.AddrPort
	head, tail int
	gather     bool // GathersPayload: writes take Packet.Payload
}

func (r *ringSocket) GathersPayload() bool { return r.gather }

func newRingPair(a, b netip.AddrPort, size, slots int) (*ringSocket, *ringSocket) {
	mk := func(addr netip.AddrPort) *ringSocket {
		r := &ringSocket{addr: addr, slot: make([][]byte, slots), n: make([]int, slots), from: make([]netip.AddrPort, slots)}
		for i := range r.slot {
			r.slot[i] = make([]byte, size)
		}
		return r
	}
	x, y := mk(a), mk(b)
	x.peer, y.peer = y, x
	return x, y
}

func (r *ringSocket) ReadBatch(pkts []Packet) (int, error) {
	k := 0
	for k < len(pkts) && r.head != r.tail {
		i := r.head % len(r.slot)
		pkts[k].N = copy(pkts[k].Buf, r.slot[i][:r.n[i]])
		pkts[k].Addr, pkts[k].RxTime, pkts[k].RxKernel = r.from[i], Now(), true
		r.head++
		k++
	}
	return k, nil
}

func (r *ringSocket) WriteBatch(pkts []Packet) (int, error) {
	d := r.peer
	for _, p := range pkts {
		if d.tail-d.head == len(d.slot) {
			continue // full: dropped
		}
		i := d.tail % len(d.slot)
		d.n[i] = copy(d.slot[i], p.Buf[:p.N])
		d.n[i] += copy(d.slot[i][d.n[i]:], p.Payload)
		d.from[i] = r.addr
		d.tail++
	}
	return len(pkts), nil
}

func (r *ringSocket) Close() error { return nil }

// BenchmarkNodePath moves messages between two nodes over the zero-allocation ring,
// driving the same batch handler the reader goroutine runs; one op is one data packet.
// Steady state allocates nothing per packet (the engine's receive buffers come from the
// heap per message: 1 MiB messages here, so per-message allocations amortise).
func BenchmarkNodePath(b *testing.B) {
	for _, gather := range []bool{false, true} {
		b.Run(fmt.Sprintf("payload_iovec=%v", gather), func(b *testing.B) { benchNodePath(b, testConfig(23600), gather) })
	}
}

// BenchmarkNodePathAuth is BenchmarkNodePath with packet authentication on (auth and
// encrypt modes): every data packet and ACK sealed and opened.
func BenchmarkNodePathAuth(b *testing.B) {
	for _, mode := range []seal.Mode{seal.Auth, seal.Encrypt} {
		b.Run("mode="+mode.String(), func(b *testing.B) { benchNodePath(b, authConfig(mode), true) })
	}
}

func authConfig(mode seal.Mode) transport.Config {
	cfg := testConfig(23600)
	cfg.Auth.Mode, cfg.Auth.Key = mode, seal.Key{7}
	return cfg
}

// benchNodePath runs the two nodes; gather makes the sockets take payloads beside the
// headers (PayloadGatherer), so the engine sends them from the message's buffer.
func benchNodePath(b *testing.B, cfg transport.Config, gather bool) {
	ap, bp := netip.MustParseAddrPort("10.0.0.1:23600"), netip.MustParseAddrPort("10.0.0.2:23600")
	sa, sb := newRingPair(ap, bp, 4096+128, 8192)
	sa.gather, sb.gather = gather, gather
	a, err := New(cfg, sa, Options{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	recvd := 0
	nb, err := New(cfg, sb, Options{Seed: 2, OnReceive: func(Received) { recvd++ }})
	if err != nil {
		b.Fatal(err)
	}
	pa, pb := make([]Packet, 64), make([]Packet, 64)
	for i := range pa {
		pa[i].Buf, pb[i].Buf = make([]byte, 4096+128), make([]byte, 4096+128)
	}
	msg := make([]byte, 1<<20)
	sent := 0
	done := func(SendResult) { sent++ }
	step := func() {
		if k, _ := sb.ReadBatch(pb); k > 0 {
			nb.shards[0].handleBatch(pb[:k])
		}
		if k, _ := sa.ReadBatch(pa); k > 0 {
			a.shards[0].handleBatch(pa[:k])
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := a.Stats().DataSent
	for a.Stats().DataSent-start < uint64(b.N) {
		if a.Pending() < 4 {
			if err := a.Send(bp, msg, done); err != nil {
				b.Fatal(err)
			}
		}
		step()
	}
	b.StopTimer()
	b.ReportMetric(float64(recvd), "msgs")
}

func TestNodePathAllocatesNothingPerPacket(t *testing.T) {
	for name, cfg := range map[string]transport.Config{"off": testConfig(23600), "auth": authConfig(seal.Auth), "encrypt": authConfig(seal.Encrypt)} {
		for _, gather := range []bool{false, true} {
			r := testing.Benchmark(func(b *testing.B) { benchNodePath(b, cfg, gather) })
			// Per packet: well under one allocation (a 1 MiB message is 256 packets and costs a
			// few: its receive buffer, the completion record, the event callbacks).
			if per := float64(r.MemAllocs) / float64(r.N); per > 0.1 {
				t.Fatalf("auth %s, payload iovecs %v: %.3f allocations per packet (%d over %d packets)", name, gather, per, r.MemAllocs, r.N)
			}
		}
	}
}
