package transport

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/smartt-transport/smartt/transport/seal"
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
	// The daemon's delivery: chunks handed over and given back (DeliverChunks).
	chunks := Hooks{DeliverChunks: true}
	b.Run("msg=1MiB/chunks", func(b *testing.B) { benchThroughputCfg(b, 1<<20, DefaultConfig(), chunks) })
	b.Run("msg=4KiB/chunks", func(b *testing.B) { benchThroughputCfg(b, 4096, DefaultConfig(), chunks) })
}

func benchThroughput(b *testing.B, msgSize int) {
	benchThroughputCfg(b, msgSize, DefaultConfig())
}

// BenchmarkEngineAuth is BenchmarkEngineThroughput's bulk case (1 MiB messages) with packet
// authentication off, in auth mode and in encrypt mode: the per-packet cost of sealing
// and opening every DATA packet and its ACK. ns/op is per 4 KiB data packet.
func BenchmarkEngineAuth(b *testing.B) {
	for _, mode := range []seal.Mode{seal.Off, seal.Auth, seal.Encrypt} {
		b.Run("mode="+mode.String(), func(b *testing.B) {
			cfg := DefaultConfig()
			if mode != seal.Off {
				cfg.Auth.Mode, cfg.Auth.Key = mode, seal.Key{1}
			}
			benchThroughputCfg(b, 1<<20, cfg)
		})
	}
}

// TestEngineAuthAllocatesNothingPerPacket: with authentication on, a data packet and its
// ACK through sender, receiver and sender again allocate nothing in steady state.
func TestEngineAuthAllocatesNothingPerPacket(t *testing.T) {
	for _, mode := range []seal.Mode{seal.Auth, seal.Encrypt} {
		cfg := DefaultConfig()
		cfg.Auth.Mode, cfg.Auth.Key = mode, seal.Key{1}
		r := newThroughputRig(t, 1<<20, cfg)
		for range 10000 {
			r.step()
		}
		// 256 packets per 1 MiB message: per-message work (event, message record) may
		// allocate at most a little; per-packet work must not.
		if a := testing.AllocsPerRun(2560, r.step); a > 0.05 {
			t.Errorf("%v: %.3f allocations per packet", mode, a)
		}
	}
}

// throughputRig is one connection between two endpoints driven packet by packet.
type throughputRig struct {
	tb        testing.TB
	snd, rcv  *Endpoint
	sAddr     netip.AddrPort
	rAddr     netip.AddrPort
	id        ConnID
	msg       []byte
	pkt, ack  []byte
	pool      *recycler
	now       int64
	queued    int
	maxQueued int
}

func newThroughputRig(tb testing.TB, msgSize int, cfg Config, hooks ...Hooks) *throughputRig {
	pool := &recycler{}
	var h Hooks
	if len(hooks) > 0 {
		h = hooks[0]
	}
	h.Buffers = pool
	snd, err := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2)), h)
	if err != nil {
		tb.Fatal(err)
	}
	rcv, _ := NewEndpoint(cfg, rand.New(rand.NewPCG(3, 4)), h)
	r := &throughputRig{tb: tb, snd: snd, rcv: rcv, pool: pool,
		sAddr: netip.MustParseAddrPort("10.0.0.1:23600"), rAddr: netip.MustParseAddrPort("10.0.0.2:23600"),
		msg: make([]byte, msgSize), pkt: make([]byte, cfg.MTU+128), ack: make([]byte, 512),
		maxQueued: max(4, 4<<20/msgSize)}
	r.id, err = snd.Dial(0, r.rAddr)
	if err != nil {
		tb.Fatal(err)
	}
	r.refill()
	return r
}

func (r *throughputRig) refill() {
	for r.queued < r.maxQueued {
		if _, err := r.snd.Send(r.now, r.id, r.msg); err != nil {
			r.tb.Fatal(err)
		}
		r.queued++
	}
}

// step moves one data packet, delivered and acknowledged.
func (r *throughputRig) step() {
	r.now += 40 // 4 KiB at ~800 Gbit/s of virtual time per packet
	t, ok := r.snd.PollTransmit(r.now, r.pkt)
	if !ok {
		r.tb.Fatalf("sender stalled at %d", r.now)
	}
	r.rcv.HandlePacket(r.now, r.pkt[:t.N], RxMeta{From: r.sAddr})
	a, ok := r.rcv.PollTransmit(r.now, r.ack)
	if !ok {
		r.tb.Fatal("no ACK")
	}
	r.snd.HandlePacket(r.now, r.ack[:a.N], RxMeta{From: r.rAddr})
	for ev := range pending(r.snd) {
		if ev.Kind == MessageSent {
			r.queued--
		}
	}
	for ev := range pending(r.rcv) {
		if ev.Kind == MessageReceived && ev.Data != nil {
			r.pool.Put(ev.Data)
		}
		if ev.Kind == MessageReceived {
			PutChunks(ev.Chunks) // a chunked message has no Data: its chunks go back instead
		}
	}
	r.refill()
}

func benchThroughputCfg(b *testing.B, msgSize int, cfg Config, hooks ...Hooks) {
	r := newThroughputRig(b, msgSize, cfg, hooks...)
	for i := 0; i < 10000; i++ { // warm up: pools and rings reach their working size
		r.step()
	}
	b.ReportAllocs()
	b.SetBytes(int64(cfg.MTU))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		r.step()
	}
	el := time.Since(start)
	b.ReportMetric(float64(b.N)/el.Seconds(), "pkts/s")
}

// BenchmarkFirstContactFlood measures what one spoofed first-contact DATA costs an
// endpoint whose connection table is full of unproven connections (each evicts one):
// the CPU price of a 60k packets/s flood.
func BenchmarkFirstContactFlood(b *testing.B) {
	cfg := DefaultConfig()
	e := newEndpoint(b, cfg)
	pkt := firstContact(b, 1, 0, 1<<30, 0)
	from := netip.MustParseAddrPort("10.66.0.1:23600")
	out := make([]byte, 2048)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		now := int64(i) * 1000
		binary.BigEndian.PutUint64(pkt[16:], uint64(i+1)) // SrcConn: a new connection each
		e.HandlePacket(now, pkt, RxMeta{From: from})
		drainEngine(e, now, out)
	}
	b.ReportMetric(float64(e.Stats().ConnsEvicted)/float64(b.N), "evictions/op")
}
