package transport

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

// daemonEngineConfig is the engine configuration transport/smarttd runs with its default
// file (default.yaml's transport block), received messages delivered in their chunks
// (daemonHooks).
func daemonEngineConfig() Config {
	cfg := DefaultConfig()
	cfg.MTU = 4108
	cfg.MaxMessage = 1<<30 + 12
	cfg.InitialRTO, cfg.MinRTO = 10_000_000, 5_000_000
	cfg.HopsFromTTL = true
	return cfg
}

// daemonHooks are the hooks transport/smarttd runs its engine with: received messages
// delivered in their chunks and large ones offered to p, as daemon.go sets them.
func daemonHooks(p Placer) Hooks { return Hooks{DeliverChunks: true, Placer: p} }

// ringPlacer stands for the daemon's receive rings: it places every message offered
// (proven peers, PlaceMin bytes and up) into a buffer of its own.
type ringPlacer struct {
	bufs map[uint64][]byte
	seq  uint64
}

func (p *ringPlacer) Place(_ netip.AddrPort, n int, _ []byte) ([]byte, uint64) {
	if p.bufs == nil {
		p.bufs = map[uint64][]byte{}
	}
	p.seq++
	p.bufs[p.seq] = make([]byte, n)
	return p.bufs[p.seq], p.seq
}

func (p *ringPlacer) Unplace(tok uint64) { delete(p.bufs, tok) }

// ledgerHeld adds up, independently of the engine's charges, what e holds for its
// peers' messages: every open message's record, the capacity of its chunk table and span
// list beyond what the record includes, each chunk at its capacity (a placed one at its
// length: the Placer's memory), whole buffers and parity at their length, and the
// entries of messages delivered out of order. It fails when a connection's count or the
// free lists disagree with what they hold or exceed their bounds.
func ledgerHeld(e *Endpoint) (held, unproven uint64, err error) {
	for _, c := range e.list {
		n := uint64(len(c.doneOOO)) * oooEntryBytes
		for r := range c.rx.all {
			n += msgHeld(r)
		}
		if n != c.held {
			return 0, 0, fmt.Errorf("conn %x: charged %d bytes, holds %d", c.id, c.held, n)
		}
		held += n
		if !c.proven {
			unproven += n
		}
	}
	var free uint64
	for cl, l := range e.chunkFree {
		for _, ch := range l {
			if cap(ch) != classSize(cl) {
				return 0, 0, fmt.Errorf("free list of class %d holds a %d-byte chunk", cl, cap(ch))
			}
			free += uint64(cap(ch))
		}
	}
	if free != e.chunkFreeBytes || free > maxFreeChunkBytes || len(e.freeRxs) > maxFreeRx {
		return 0, 0, fmt.Errorf("free lists: %d chunk bytes (counted %d, bound %d), %d records (bound %d)",
			free, e.chunkFreeBytes, maxFreeChunkBytes, len(e.freeRxs), maxFreeRx)
	}
	return held, unproven, nil
}

// msgHeld is what open message r holds (ledgerHeld).
func msgHeld(r *rxMsg) uint64 {
	n := msgRecBytes
	if k := cap(r.chunks); k > tableKeep {
		n += uint64(k-tableKeep) * chunkSlotBytes
	}
	if k := cap(r.spans); k > spanKeep {
		n += uint64(k-spanKeep) * spanBytes
	}
	for _, ch := range r.chunks {
		switch {
		case ch == nil:
		case r.place != nil:
			n += uint64(len(ch))
		default:
			n += uint64(cap(ch))
		}
	}
	n += uint64(len(r.buf))
	for _, b := range r.ec {
		n += ecBlockBytes
		for _, p := range b.parity {
			n += uint64(cap(p))
		}
	}
	return n
}

// ledgerCheck: what e charged (Stats.RecvBuffered, the unproven share, Stats.ConnHeld)
// equals what it holds (ledgerHeld), to the byte, and so do the TIME_WAIT gauges, within
// their caps (timeWaitCheck).
func ledgerCheck(e *Endpoint) error {
	held, unproven, err := ledgerHeld(e)
	if err != nil {
		return err
	}
	st := e.Stats()
	if st.RecvBuffered != held || e.unprovenHeld != unproven {
		return fmt.Errorf("charged %d bytes (unproven %d), holds %d (unproven %d)", st.RecvBuffered, e.unprovenHeld, held, unproven)
	}
	if want := uint64(e.NumConns()) * e.cfg.ConnCharge(); st.ConnHeld != want {
		return fmt.Errorf("ConnHeld %d for %d connections, want %d", st.ConnHeld, e.NumConns(), want)
	}
	return timeWaitCheck(e)
}

func checkLedger(t *testing.T, e *Endpoint) {
	t.Helper()
	if err := ledgerCheck(e); err != nil {
		t.Fatal(err)
	}
}

// TestLedgerMatchesAllocations: in the daemon's configuration (DeliverChunks, a Placer),
// ordered and unordered, honest messages of every size over a network that drops and
// reorders, with a spoofer opening partial messages beside them, what the receiver
// charges equals what it holds after every step (ledgerAudit: every chunk at its
// capacity, records, tables, spans, placements), and nothing is held once all is done.
func TestLedgerMatchesAllocations(t *testing.T) {
	for _, tc := range []struct{ unordered, ec bool }{{false, false}, {true, false}, {false, true}} {
		unordered := tc.unordered
		pl := &ringPlacer{}
		cfg := daemonEngineConfig()
		cfg.Unordered = unordered
		if tc.ec {
			// Recovery ec: parity blocks held while their data is missing, charged at
			// their records and buffers' capacity (ecBlockBytes).
			cfg.Recovery = RecoveryConfig{Mode: RecoveryEC, K: 4, M: 2}
		}
		parityHeld := 0
		p := newPair(t, cfg, 5000, daemonHooks(pl))
		rng := rand.New(rand.NewPCG(5, 6))
		p.drop = func(_ *Endpoint, _ []byte) bool { return rng.IntN(100) < 3 }
		p.extra = func(_ *Endpoint, _ []byte) int64 { return rng.Int64N(40000) }
		id, err := p.a.Dial(0, p.bAddr)
		if err != nil {
			t.Fatal(err)
		}
		sizes := []int{1, 2, 63, 64, 65, 100, 4108, 4109, 9000, 16384, 16385, 70000, 300000, 1 << 20}
		for i := range 3 * len(sizes) {
			if _, err := p.a.Send(0, id, make([]byte, sizes[i%len(sizes)])); err != nil {
				t.Fatal(err)
			}
		}
		sent, recv, spoofs := 0, 0, 0
		p.runUntil(t, 60e9, func() bool {
			if spoofs < 400 && rng.IntN(4) == 0 {
				spoofPartial(t, p.b, p.now, spoofs)
				spoofs++
			}
			checkLedger(t, p.b)
			checkLedger(t, p.a)
			for _, c := range p.b.list {
				for r := range c.rx.all {
					parityHeld += len(r.ec)
				}
			}
			for ev := range pending(p.b) {
				if ev.Kind == MessageReceived {
					recv++
					PutChunks(ev.Chunks)
					delete(pl.bufs, ev.Placed)
				}
			}
			for ev := range pending(p.a) {
				if ev.Kind == MessageSent {
					sent++
				}
			}
			return sent == 3*len(sizes)
		})
		if p.b.Stats().MsgsPlaced == 0 {
			t.Fatal("no message was placed: the Placer path went untested")
		}
		// Silence: the spoofed connections expire, everything is given back.
		p.now += int64(cfg.IdleTimeout) * 2
		p.b.HandleTimeout(p.now)
		checkLedger(t, p.b)
		if st := p.b.Stats(); st.RecvBuffered != 0 || len(pl.bufs) != 0 {
			t.Fatalf("unordered %v: after silence RecvBuffered %d, %d placements outstanding", unordered, st.RecvBuffered, len(pl.bufs))
		}
		if tc.ec && (parityHeld == 0 || p.b.Stats().ParityRecv == 0) {
			t.Fatalf("ec: parity received %d, parity blocks seen held %d: the walk never met a parity block", p.b.Stats().ParityRecv, parityHeld)
		}
		t.Logf("unordered %v, ec %v: %d delivered, %d spoofed packets, peak charged %d, parity blocks seen held %d",
			unordered, tc.ec, recv, spoofs, p.b.Stats().RecvBufferedMax, parityHeld)
	}
}

// spoofPartial sends e a spoofed DATA packet from a source of its own (i picks it) that
// opens a message it never finishes: sizes and offsets vary, claims up to 4 MiB.
func spoofPartial(t *testing.T, e *Endpoint, now int64, i int) {
	n := []uint32{2, 100, 5000, 20000, 4 << 20}[i%5]
	off := uint32(i*4108) % n
	b := tinyPacket(t, uint64(1000+i%37), uint32(i/37), n, off, uint64(i/37)*(1<<22+MsgOverhead), 100+uint32(i/37))
	from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 99, 0, byte(i % 37)}), 23600)
	e.HandlePacket(now, b, RxMeta{From: from})
}

// tinyPacket is a first-contact DATA packet (65 bytes: a 1-byte payload) of connection
// src: message msgID of msgLen bytes, the byte at offset off, PSN psn (floor 100).
func tinyPacket(t testing.TB, src uint64, msgID, msgLen, off uint32, streamStart uint64, psn uint32) []byte {
	t.Helper()
	p := wire.Packet{Header: wire.Header{Type: wire.TypeData, SrcConn: src}}
	p.Data = wire.Data{PSN: psn, AckFloor: 100, MsgID: msgID, MsgLen: msgLen, Offset: off,
		PayloadLen: 1, StreamStart: streamStart}
	p.Payload = []byte{0xee}
	b := make([]byte, 128)
	n, err := p.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	if n != 65 {
		t.Fatalf("packet is %d bytes, want 65", n)
	}
	return b[:n]
}

// heapStats returns HeapAlloc and HeapInuse after a garbage collection.
func heapStats() (alloc, inuse uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.HeapInuse
}

// floodSlack is the constant of the held-versus-charged bound: the engine's free lists
// (maxFreeChunkBytes of chunks, maxFreeRx records), its rings and tables at their
// working size, and the test's own heap noise.
const floodSlack = 8 << 20

// TestSpoofedTinyFloodHeldIsCharged: the engine in the daemon's configuration gets
// 50,000 spoofed 65-byte packets, each the second byte of a 2-byte message whose first
// byte never arrives, from many source addresses (500 messages on each of 100 spoofed
// connections, then one on each of 50,000). The live heap grows by at most twice what the
// engine charged for them (Stats.RecvBuffered + Stats.ConnHeld) plus floodSlack, checked
// every 5,000 packets; once their connections expire (UnprovenTimeout) the heap is back
// within 16 MiB of where it started. (Before the ledger, each such message held a 16 KiB
// chunk and was charged 26 bytes.)
func TestSpoofedTinyFloodHeldIsCharged(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: measures the heap over 50,000 packets")
	}
	const total = 50000
	for _, perConn := range []int{500, 1} {
		e, err := NewEndpoint(daemonEngineConfig(), nil2(), daemonHooks(&ringPlacer{}))
		if err != nil {
			t.Fatal(err)
		}
		out := make([]byte, 9000)
		alloc0, inuse0 := heapStats()
		packet := func(i int) ([]byte, netip.AddrPort) {
			conn, msg := i/perConn, uint32(i%perConn)
			b := tinyPacket(t, uint64(conn+1), msg, 2, 1, uint64(msg)*(2+MsgOverhead), 100+msg)
			return b, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(conn >> 16), byte(conn >> 8), byte(conn)}), 23600)
		}
		now := flood(e, 1e9, total, 5000, packet, func(n int, grown int64) {
			st := e.Stats()
			charged := st.RecvBuffered + st.ConnHeld
			t.Logf("%d per connection, %d packets: heap +%d bytes (%d per packet), charged %d (RecvBuffered %d, ConnHeld %d, %d connections)",
				perConn, n, grown, grown/int64(n), charged, st.RecvBuffered, st.ConnHeld, e.NumConns())
			if grown > int64(2*charged+floodSlack) {
				t.Fatalf("%d per connection: after %d packets the heap grew %d bytes, more than 2 x %d charged + %d",
					perConn, n, grown, charged, floodSlack)
			}
		})
		if st := e.Stats(); st.RecvBudgetDrops != 0 || st.MsgsDelivered != 0 {
			t.Fatalf("%d per connection: %d budget drops, %d delivered: the flood did not hold what it should", perConn, st.RecvBudgetDrops, st.MsgsDelivered)
		}
		now += int64(e.Config().IdleTimeout) + 1 // past UnprovenTimeout and IdleTimeout
		e.HandleTimeout(now)
		drainEngine(e, now, out)
		alloc, inuse := heapStats()
		t.Logf("%d per connection: after expiry %d connections, heap %+d bytes (in use %+d)", perConn, e.NumConns(), int64(alloc)-int64(alloc0), int64(inuse)-int64(inuse0))
		if e.NumConns() != 0 || e.Stats().RecvBuffered != 0 || int64(alloc)-int64(alloc0) > 16<<20 {
			t.Fatalf("%d per connection: after expiry %d connections, RecvBuffered %d, heap %+d bytes (bound 16 MiB)",
				perConn, e.NumConns(), e.Stats().RecvBuffered, int64(alloc)-int64(alloc0))
		}
		runtime.KeepAlive(e)
	}
}

// flood hands e count packets made by pkt, 1 us apart after now, draining e after each;
// after every every-th packet it calls check with the packets so far and the heap's
// growth since the flood began. It returns the time of the last packet.
func flood(e *Endpoint, now int64, count, every int, pkt func(i int) ([]byte, netip.AddrPort), check func(n int, grown int64)) int64 {
	out := make([]byte, 9000)
	alloc0, _ := heapStats()
	for i := range count {
		b, from := pkt(i)
		now += 1000
		e.HandlePacket(now, b, RxMeta{From: from})
		drainEngine(e, now, out)
		if (i+1)%every == 0 {
			alloc, _ := heapStats()
			check(i+1, int64(alloc)-int64(alloc0))
		}
	}
	return now
}

// drainEngine takes everything e has to send and to say at now.
func drainEngine(e *Endpoint, now int64, out []byte) {
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

// TestFitsNoWrap: flow control compares a message's claim against the window without a
// sum that wraps, so a first contact whose StreamStart lies near 2^64 is refused (before,
// StreamStart + claim wrapped to a small number and the message was admitted).
func TestFitsNoWrap(t *testing.T) {
	c := &conn{}
	const window = 64 << 20
	for _, tc := range []struct {
		start, claim uint64
		ok           bool
	}{
		{0, window, true}, {1, window, false}, {window, 0, true}, {window, 1, false},
		{math.MaxUint64 - 10, 1256, false}, {math.MaxUint64, 1, false}, {math.MaxUint64 - window, window, false},
	} {
		if got := c.fits(tc.start, tc.claim, window); got != tc.ok {
			t.Errorf("fits(%d, %d) = %v, want %v", tc.start, tc.claim, got, tc.ok)
		}
	}
	e, err := NewEndpoint(daemonEngineConfig(), nil2(), daemonHooks(nil))
	if err != nil {
		t.Fatal(err)
	}
	for i, start := range []uint64{math.MaxUint64 - 10, math.MaxUint64 - 1000 - MsgOverhead + 1, 1 << 63} {
		b := tinyPacket(t, uint64(i+1), 1, 1000, 0, start, 101)
		e.HandlePacket(1e9, b, RxMeta{From: netip.MustParseAddrPort("10.0.0.9:23600")})
		if st := e.Stats(); st.RecvBuffered != 0 || st.BeyondWindow != uint64(i+1) {
			t.Fatalf("StreamStart %d: RecvBuffered %d, BeyondWindow %d: admitted", start, st.RecvBuffered, st.BeyondWindow)
		}
	}
}

// TestUnprovenShareBoundsTinyFlood: spoofed tiny messages (the second byte of 2-byte
// messages, 100 per spoofed connection) fill the unproven share, RecvBudget/8, to within
// one message's charge and no further: beyond it every packet is refused and counted, and
// what is held (ledgerHeld, every buffer at its capacity) never exceeds the share.
func TestUnprovenShareBoundsTinyFlood(t *testing.T) {
	cfg := daemonEngineConfig()
	cfg.MaxMessage, cfg.RecvBudget = 4<<20, 4<<20
	e, err := NewEndpoint(cfg, nil2(), daemonHooks(&ringPlacer{}))
	if err != nil {
		t.Fatal(err)
	}
	share := uint64(cfg.RecvBudget) / unprovenShare
	perMsg := msgRecBytes + bufCap(2)
	out := make([]byte, 9000)
	now := int64(1e9)
	n := int(2 * share / perMsg) // twice what fits
	for i := range n {
		conn, msg := i/100, uint32(i%100)
		b := tinyPacket(t, uint64(conn+1), msg, 2, 1, uint64(msg)*(2+MsgOverhead), 100+msg)
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 7, byte(conn >> 8), byte(conn)}), 23600)
		now += 1000
		e.HandlePacket(now, b, RxMeta{From: from})
		drainEngine(e, now, out)
		held, unproven, err := ledgerHeld(e)
		if err != nil {
			t.Fatal(err)
		}
		if unproven > share || held != e.Stats().RecvBuffered {
			t.Fatalf("after %d packets: unproven connections hold %d bytes (share %d), charged %d of %d held", i+1, unproven, share, e.Stats().RecvBuffered, held)
		}
	}
	st := e.Stats()
	if st.RecvBuffered+perMsg <= share || st.RecvBudgetDrops < uint64(n/2) {
		t.Fatalf("held %d of a %d-byte share (%d per message) with %d of %d packets refused", st.RecvBuffered, share, perMsg, st.RecvBudgetDrops, n)
	}
	t.Logf("%d packets: %d bytes held of a %d-byte share, %d refused", n, st.RecvBuffered, share, st.RecvBudgetDrops)
}

// TestHeldBound: the daemon's default engine holds at most 2 GiB (recv_budget) plus one
// 1 GiB message's charge, 14 MiB of connections, 17 MiB of TIME_WAIT entries and 4.4 MiB
// of free lists.
func TestHeldBound(t *testing.T) {
	cfg := daemonEngineConfig()
	if cfg.ConnCharge() != 3072+4096/8 {
		t.Fatalf("ConnCharge %d", cfg.ConnCharge())
	}
	got := cfg.HeldBound()
	lo := uint64(cfg.RecvBudget) + uint64(cfg.MaxMessage) + 4096*3584 + (4096+65536)*TimeWaitCharge
	if got < lo || got > lo+8<<20 {
		t.Fatalf("HeldBound %d, want %d .. %d", got, lo, lo+8<<20)
	}
	t.Logf("HeldBound %d bytes (%.2f GiB)", got, float64(got)/(1<<30))
}
