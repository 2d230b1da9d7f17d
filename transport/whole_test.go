package transport

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// countPool is a BufferPool that counts the buffers it hands out.
type countPool struct{ gets int }

func (p *countPool) Get(n int) []byte { p.gets++; return make([]byte, n) }
func (p *countPool) Put([]byte)       {}

// TestProvenLargeMessageWhole: without DeliverChunks, a 256 KiB message of a proven peer
// takes its buffer from Hooks.Buffers at its first packet, charged whole (RecvBuffered
// covers it from then on), and arrives intact; with a budget whose quarter it exceeds, or
// above wholeMax (a 1 MiB one, whatever the budget), it is chunked (holding only what
// arrived) and assembled at delivery.
func TestProvenLargeMessageWhole(t *testing.T) {
	for _, tc := range []struct {
		budget    int64
		size      int
		wantWhole bool
	}{{2 << 30, wholeMax, true}, {1 << 20, wholeMax, false}, {2 << 30, wholeMax + 1, false}, {2 << 30, 1 << 20, false}} {
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
