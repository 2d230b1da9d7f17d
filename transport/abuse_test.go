package transport

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

// TestGarbageIsCountedAndDropped feeds an endpoint with an open connection random bytes,
// every truncation of valid packets, bit-flipped valid packets and packets for unknown
// connections: nothing panics, everything is counted, and the connection still delivers.
func TestGarbageIsCountedAndDropped(t *testing.T) {
	p := newPair(t, DefaultConfig(), 2000)
	id, _ := p.a.Dial(0, p.bAddr)
	if _, err := p.a.Send(0, id, make([]byte, 20000)); err != nil {
		t.Fatal(err)
	}
	// Capture a few valid packets of each direction.
	var samples [][]byte
	p.drop = func(from *Endpoint, b []byte) bool {
		if len(samples) < 32 {
			samples = append(samples, append([]byte(nil), b...))
		}
		return false
	}
	got := 0
	var real ConnID // b's side of the connection
	p.runUntil(t, 1e9, func() bool {
		for ev := range pending(p.b) {
			if ev.Kind == MessageReceived {
				got++
				real = ev.Conn
			}
		}
		return got == 1
	})
	p.drop = nil
	if len(samples) < 4 {
		t.Fatalf("captured only %d packets", len(samples))
	}
	rng := rand.New(rand.NewPCG(7, 7))
	evil := netip.MustParseAddrPort("10.6.6.6:666")
	before := p.b.Stats()
	fed := 0
	feed := func(b []byte) {
		fed++
		p.b.HandlePacket(p.now, b, RxMeta{From: evil})
		p.a.HandlePacket(p.now, b, RxMeta{From: evil})
	}
	// Garbage from a new address may open connections of its own (that is what a
	// first DATA does); it must never reach the real one.
	// Random garbage of every length up to 200 bytes, with and without a valid first byte.
	for n := 0; n < 200; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		feed(b)
		if n > 0 {
			b[0] = wire.Version<<4 | byte(1+rng.IntN(7))
			feed(b)
		}
	}
	// Every truncation and random bit flips of valid packets.
	for _, s := range samples {
		for n := 0; n < len(s) && n < 300; n++ {
			feed(s[:n])
		}
		for k := 0; k < 200; k++ {
			b := append([]byte(nil), s...)
			b[rng.IntN(len(b))] ^= 1 << rng.IntN(8)
			feed(b)
		}
	}
	// Well-formed packets for connections that do not exist.
	var pk wire.Packet
	buf := make([]byte, 200)
	for k := 0; k < 100; k++ {
		pk = wire.Packet{Header: wire.Header{Type: wire.TypeAck, DstConn: rng.Uint64() | 1, SrcConn: rng.Uint64() | 1}}
		pk.Ack.SackWords = 1
		n, err := pk.Encode(buf)
		if err != nil {
			t.Fatal(err)
		}
		feed(buf[:n])
	}
	st := p.b.Stats()
	if st.Malformed == before.Malformed {
		t.Fatal("malformed packets not counted")
	}
	if st.UnknownConn == before.UnknownConn {
		t.Fatal("packets for unknown connections not counted")
	}
	var kinds uint64
	for _, k := range st.MalformedByKind {
		kinds += k
	}
	if kinds != st.Malformed {
		t.Fatalf("malformed by kind sums to %d, total %d", kinds, st.Malformed)
	}
	// The endpoints answer some of it with RESETs; drain them without letting them loop.
	for {
		if _, ok := p.b.PollTransmit(p.now, p.buf); !ok {
			break
		}
	}
	// The real connection survived and still works in both directions.
	if p.a.NumConns() == 0 {
		t.Fatal("connection was torn down by garbage")
	}
	second := make([]byte, 50000)
	for i := range second {
		second[i] = byte(i)
	}
	if _, err := p.a.Send(p.now, id, second); err != nil {
		t.Fatal(err)
	}
	p.runUntil(t, p.now+1e9, func() bool {
		for ev := range pending(p.b) {
			if ev.Kind == MessageReceived && ev.Conn == real {
				got++
				if !bytes.Equal(ev.Data, second) {
					t.Fatal("second message corrupted")
				}
			}
		}
		return got == 2
	})
	t.Logf("fed %d bad datagrams; b: malformed=%d unknown=%d violations=%d", fed, st.Malformed, st.UnknownConn, st.ProtoViolations)
}

// TestConnectionFloodIsCapped: a peer opening connection after connection gets at most
// MaxConns of them; beyond the cap the oldest unproven one is evicted (and RESET), so
// the table never exceeds the cap and never locks.
func TestConnectionFloodIsCapped(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxConns = 16
	e := newEndpoint(t, cfg)
	from := netip.MustParseAddrPort("10.9.9.9:23600")
	buf := make([]byte, 200)
	for k := 0; k < 100; k++ {
		p := wire.Packet{Header: wire.Header{Type: wire.TypeData, SrcConn: uint64(k + 1)}}
		p.Data = wire.Data{PSN: 7, AckFloor: 7, MsgLen: 2, PayloadLen: 1}
		p.Payload = []byte{byte(k)}
		n, err := p.Encode(buf)
		if err != nil {
			t.Fatal(err)
		}
		e.HandlePacket(int64(k+1), buf[:n], RxMeta{From: from})
	}
	if e.NumConns() != 16 {
		t.Fatalf("%d connections open, cap 16", e.NumConns())
	}
	if got := e.Stats().ConnsEvicted; got != 84 {
		t.Fatalf("%d evictions counted, want 84", got)
	}
	resets := 0
	out := make([]byte, 5000)
	for {
		tx, ok := e.PollTransmit(200, out)
		if !ok {
			break
		}
		if tx.Type == wire.TypeReset {
			resets++
		}
	}
	if resets != 84 {
		t.Fatalf("%d RESETs sent, want 84", resets)
	}
	if got, want := e.Stats().RecvBuffered, 16*(msgRecBytes+2); got != want {
		t.Fatalf("%d bytes buffered after evictions, want %d (the 16 live half-messages)", got, want)
	}
	// The application can still dial: it evicts an unproven connection too.
	if _, err := e.Dial(300, from); err != nil {
		t.Fatalf("dial at max_conns with unproven connections: %v", err)
	}
	if e.NumConns() != 16 {
		t.Fatalf("%d connections open after dial, cap 16", e.NumConns())
	}
}
