package transport

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

// countPool is a BufferPool that counts the buffers it hands out.
type countPool struct{ gets int }

func (p *countPool) Get(n int) []byte { p.gets++; return make([]byte, n) }
func (p *countPool) Put([]byte)       {}

// TestProvenLargeMessageWhole: without DeliverChunks, a 256 KiB message of a proven peer
// takes its buffer from Hooks.Buffers at its first packet, charged whole (RecvBuffered
// covers it from then on), and arrives intact, and so does one of wholeMax plus the 5
// bytes the peer delivered before (its credit, wholeNow); with a budget whose quarter it
// exceeds, or above that (a 1 MiB one, whatever the budget), it is chunked (holding only
// what arrived) and assembled at delivery.
func TestProvenLargeMessageWhole(t *testing.T) {
	for _, tc := range []struct {
		budget    int64
		size      int
		wantWhole bool
	}{{2 << 30, wholeMax, true}, {1 << 20, wholeMax, false}, {2 << 30, wholeMax + 5, true}, {2 << 30, wholeMax + 6, false}, {2 << 30, 1 << 20, false}} {
		budget := tc.budget
		cfg := DefaultConfig()
		cfg.RecvBudget, cfg.MaxMessage = budget, 1<<20
		pool := &countPool{}
		snd, _ := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2)))
		rcv, err := NewEndpoint(cfg, rand.New(rand.NewPCG(3, 4)), Hooks{Buffers: pool})
		if err != nil {
			t.Fatal(err)
		}
		sAddr, rAddr := netip.MustParseAddrPort("10.0.0.1:23600"), netip.MustParseAddrPort("10.0.0.2:23600")
		id, _ := snd.Dial(0, rAddr)
		pkt, ack := make([]byte, cfg.MTU+128), make([]byte, 512)
		var now int64
		var got []byte
		step := func() (dataSent bool) {
			now += 1000
			if tx, ok := snd.PollTransmit(now, pkt); ok {
				rcv.HandlePacket(now, pkt[:tx.N], RxMeta{From: sAddr})
				dataSent = true
			}
			for {
				a, ok := rcv.PollTransmit(now, ack)
				if !ok {
					break
				}
				snd.HandlePacket(now, ack[:a.N], RxMeta{From: rAddr})
			}
			for ev := range pending(rcv) {
				if ev.Kind == MessageReceived {
					got = ev.Data
				}
			}
			return dataSent
		}
		// A small message first, so that the receiver's peer proves its address.
		if _, err := snd.Send(now, id, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		for range 100 {
			step()
		}
		if got == nil || string(got) != "hello" {
			t.Fatalf("budget %d: first message not delivered: %q", budget, got)
		}
		msg := make([]byte, tc.size)
		for i := range msg {
			msg[i] = byte(i * 7)
		}
		gets := pool.gets
		if _, err := snd.Send(now, id, msg); err != nil {
			t.Fatal(err)
		}
		for !step() {
		}
		held, whole := rcv.Stats().RecvBuffered, pool.gets > gets
		if whole != tc.wantWhole {
			t.Errorf("budget %d, %d bytes: whole buffer at the first packet %v, want %v", budget, tc.size, whole, tc.wantWhole)
		}
		if whole && held < uint64(len(msg)) {
			t.Errorf("budget %d: whole buffer held but RecvBuffered %d < %d", budget, held, len(msg))
		}
		if !whole && held > 2*RecvChunk+uint64(msgRecBytes) {
			t.Errorf("budget %d: chunked, but RecvBuffered %d after one packet", budget, held)
		}
		got = nil
		for range 10000 {
			if step(); got != nil {
				break
			}
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("budget %d: %d-byte message not delivered intact (%d bytes)", budget, tc.size, len(got))
		}
		if pool.gets != gets+1 {
			t.Errorf("budget %d: %d buffers taken for one message, want 1", budget, pool.gets-gets)
		}
		if st := rcv.Stats(); st.RecvBuffered != 0 {
			t.Errorf("budget %d: RecvBuffered %d after delivery", budget, st.RecvBuffered)
		}
	}
}

// TestReservedCoversEveryChunk: the in-order fast path (appendData) writes a payload
// without reserving only when every chunk the payload falls in is there already; a
// payload of up to wire.MaxPayload spans several 16 KiB chunks, and one missing in the
// middle (or beyond the table) sends it to reserve.
func TestReservedCoversEveryChunk(t *testing.T) {
	ch := func() []byte { return make([]byte, RecvChunk) }
	r := &rxMsg{n: 5 * RecvChunk, chunks: [][]byte{ch(), nil, ch(), ch()}}
	for _, tc := range []struct {
		off, n int
		want   bool
	}{
		{0, RecvChunk, true},                  // all of chunk 0
		{RecvChunk - 1, 2, false},             // into chunk 1, not there
		{2 * RecvChunk, 2 * RecvChunk, true},  // chunks 2 and 3
		{0, 3 * RecvChunk, false},             // chunks 0 and 2 there, 1 in between not
		{3 * RecvChunk, RecvChunk + 1, false}, // beyond the table
		{3 * RecvChunk, 0, true},              // an empty payload in chunk 3
	} {
		if got := r.reserved(tc.off, tc.n); got != tc.want {
			t.Errorf("reserved(%d, %d) = %v, want %v", tc.off, tc.n, got, tc.want)
		}
	}
	if w := (&rxMsg{n: 10, buf: make([]byte, 10)}); !w.reserved(4, 6) {
		t.Error("a whole buffer holds every byte of its message")
	}
}

// TestLateWhole: a proven peer's 1 MiB message (no DeliverChunks) stays in chunks until
// what is still to arrive fits wholeMax, then moves into one buffer from Hooks.Buffers,
// charged whole from then on (the ledger matches at every step) and delivered intact
// with no further buffer; with DeliverChunks it stays in chunks to the end.
func TestLateWhole(t *testing.T) {
	for _, chunks := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.MaxMessage = 1 << 20
		pool := &countPool{}
		snd, _ := NewEndpoint(cfg, rand.New(rand.NewPCG(1, 2)))
		rcv, err := NewEndpoint(cfg, rand.New(rand.NewPCG(3, 4)), Hooks{Buffers: pool, DeliverChunks: chunks})
		if err != nil {
			t.Fatal(err)
		}
		sAddr, rAddr := netip.MustParseAddrPort("10.0.0.1:23600"), netip.MustParseAddrPort("10.0.0.2:23600")
		id, _ := snd.Dial(0, rAddr)
		pkt, ack := make([]byte, cfg.MTU+128), make([]byte, 512)
		var now int64
		var got []byte
		fed := 0 // payload bytes of the 1 MiB message handed to the receiver
		step := func() {
			now += 1000
			if tx, ok := snd.PollTransmit(now, pkt); ok {
				rcv.HandlePacket(now, pkt[:tx.N], RxMeta{From: sAddr})
				if tx.N > 1000 {
					fed += tx.N - wire.DataHdrLen
				}
			}
			for a, ok := rcv.PollTransmit(now, ack); ok; a, ok = rcv.PollTransmit(now, ack) {
				snd.HandlePacket(now, ack[:a.N], RxMeta{From: rAddr})
			}
			for ev, ok := rcv.PollEvent(); ok; ev, ok = rcv.PollEvent() {
				if ev.Kind == MessageReceived {
					got = ev.Data
					for _, ch := range ev.Chunks {
						got = append(got, ch...)
					}
				}
			}
		}
		if _, err := snd.Send(now, id, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		for range 100 {
			step()
		}
		msg := make([]byte, 1<<20)
		for i := range msg {
			msg[i] = byte(i * 7)
		}
		gets := pool.gets
		if _, err := snd.Send(now, id, msg); err != nil {
			t.Fatal(err)
		}
		got, fed = nil, 0
		moved := -1 // bytes fed when the buffer was taken
		for range 20000 {
			if step(); got != nil {
				break
			}
			if err := ledgerCheck(rcv); err != nil {
				t.Fatalf("chunks %v: %v", chunks, err)
			}
			held := rcv.Stats().RecvBuffered
			if moved < 0 && pool.gets > gets {
				moved = fed
				if held < uint64(len(msg)) {
					t.Errorf("chunks %v: whole buffer taken but RecvBuffered %d < %d", chunks, held, len(msg))
				}
			}
			if moved < 0 && held > uint64(fed)+2*RecvChunk+msgRecBytes+256 {
				t.Fatalf("chunks %v: in chunks, RecvBuffered %d after %d bytes", chunks, held, fed)
			}
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("chunks %v: message not delivered intact (%d bytes)", chunks, len(got))
		}
		switch {
		case chunks && moved >= 0:
			t.Errorf("DeliverChunks: a buffer was taken after %d bytes", moved)
		case !chunks && (moved < len(msg)-wholeMax || moved > len(msg)-wholeMax+RecvChunk):
			t.Errorf("buffer taken after %d of %d bytes, want once at most %d were left", moved, len(msg), wholeMax)
		case !chunks && pool.gets != gets+1:
			t.Errorf("%d buffers taken for one message, want 1", pool.gets-gets)
		}
		if st := rcv.Stats(); st.RecvBuffered != 0 {
			t.Errorf("chunks %v: RecvBuffered %d after delivery", chunks, st.RecvBuffered)
		}
	}
}
