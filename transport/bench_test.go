package transport

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// recycler is a BufferPool that hands back the buffers the benchmark returns to it, so
// steady state allocates nothing.
type recycler struct{ free [][]byte }

func (r *recycler) Get(n int) []byte {
	for i := len(r.free) - 1; i >= 0; i-- {
		if len(r.free[i]) == n {
			b := r.free[i]
			r.free[i] = r.free[len(r.free)-1]
			r.free = r.free[:len(r.free)-1]
			return b
		}
	}
	return make([]byte, n)
}

func (r *recycler) Put(b []byte) { r.free = append(r.free, b) }

// BenchmarkEngineThroughput moves messages over one connection through the sender, the
// receiver and the ACK path, in memory on one goroutine. One op is one data packet of MTU
// (4096) payload bytes, with its ACK; the pkts/s metric is data packets per second.
// msg=1MiB is bulk transfer; msg=4KiB is one packet per message, so per-message work
// (events, message records, delivery) is paid on every packet.
func BenchmarkEngineThroughput(b *testing.B) {
	b.Run("msg=1MiB", func(b *testing.B) { benchThroughput(b, 1<<20) })
	b.Run("msg=4KiB", func(b *testing.B) { benchThroughput(b, 4096) })
}

func benchThroughput(b *testing.B, msgSize int) {
	cfg := DefaultConfig()
	pool := &recycler{}
	cfg.Buffers = pool
	snd, _ := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2)))
	rcv, _ := NewEndpoint(cfg, rand.New(rand.NewPCG(3, 4)))
	sAddr := netip.MustParseAddrPort("10.0.0.1:23600")
	rAddr := netip.MustParseAddrPort("10.0.0.2:23600")
	id, _ := snd.Dial(0, rAddr)
	msg := make([]byte, msgSize)
	pkt := make([]byte, cfg.MTU+128)
	ack := make([]byte, 512)
	var now int64
	queued := 0
	refill := func() {
		for queued < max(4, 4<<20/msgSize) {
			if _, err := snd.Send(now, id, msg); err != nil {
				b.Fatal(err)
			}
			queued++
		}
	}
	drain := func() {
		for {
			ev, ok := snd.PollEvent()
			if !ok {
				break
			}
			if ev.Kind == MessageSent {
				queued--
			}
		}
		for {
			ev, ok := rcv.PollEvent()
			if !ok {
				break
			}
			if ev.Kind == MessageReceived {
				pool.Put(ev.Data)
			}
		}
	}
	// One data packet, delivered, acknowledged.
	step := func() {
		now += 40 // 4 KiB at ~800 Gbit/s of virtual time per packet
		t, ok := snd.PollTransmit(now, pkt)
		if !ok {
			b.Fatalf("sender stalled at %d", now)
		}
		rcv.HandlePacket(now, pkt[:t.N], RxMeta{From: sAddr})
		a, ok := rcv.PollTransmit(now, ack)
		if !ok {
			b.Fatal("no ACK")
		}
		snd.HandlePacket(now, ack[:a.N], RxMeta{From: rAddr})
		drain()
		refill()
	}
	refill()
	for i := 0; i < 10000; i++ { // warm up: pools and rings reach their working size
		step()
	}
	b.ReportAllocs()
	b.SetBytes(int64(cfg.MTU))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		step()
	}
	el := time.Since(start)
	b.ReportMetric(float64(b.N)/el.Seconds(), "pkts/s")
}

// BenchmarkFirstContactFlood measures what one spoofed first-contact DATA costs an
// endpoint whose connection table is full of unproven connections (each evicts one):
// the CPU price of the 60k packets/s flood of issue 13's finding 4.
func BenchmarkFirstContactFlood(b *testing.B) {
	cfg := DefaultConfig()
	e, err := NewEndpoint(cfg, nil2())
	if err != nil {
		b.Fatal(err)
	}
	pkt := firstContact(b, 1, 0, 1<<30, 0)
	from := netip.MustParseAddrPort("10.66.0.1:23600")
	out := make([]byte, 2048)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		now := int64(i) * 1000
		binary.BigEndian.PutUint64(pkt[16:], uint64(i+1)) // SrcConn: a new connection each
		e.HandlePacket(now, pkt, RxMeta{From: from})
		for {
			if _, ok := e.PollTransmit(now, out); !ok {
				break
			}
		}
		for {
			if _, ok := e.PollEvent(); !ok {
				break
			}
		}
		if d, ok := e.NextTimeout(); ok && d <= now {
			e.HandleTimeout(now)
		}
	}
	b.ReportMetric(float64(e.Stats().ConnsEvicted)/float64(b.N), "evictions/op")
}
