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
			for ev, ok := rcv.PollEvent(); ok; ev, ok = rcv.PollEvent() {
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
