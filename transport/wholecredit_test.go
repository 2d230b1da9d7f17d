package transport

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

// creditPeer forges the DATA of a peer that rcv dialled (so the connection is proven
// from the start) and that decides how much of each message it sends.
type creditPeer struct {
	t    *testing.T
	rcv  *Endpoint
	id   ConnID
	from netip.AddrPort
	psn  uint32
	now  int64
	buf  []byte
}

func newCreditPeer(t *testing.T, cfg Config, pool BufferPool) *creditPeer {
	rcv, err := NewEndpoint(cfg, rand.New(rand.NewPCG(3, 4)), Hooks{Buffers: pool})
	if err != nil {
		t.Fatal(err)
	}
	from := netip.MustParseAddrPort("10.7.7.7:23600")
	id, err := rcv.Dial(0, from)
	if err != nil {
		t.Fatal(err)
	}
	return &creditPeer{t: t, rcv: rcv, id: id, from: from, psn: 100, buf: make([]byte, 8192)}
}

// send hands rcv the packet of message id (n bytes, from stream offset start) at offset
// off, 4 KiB or what is left, and drains what rcv answers.
func (p *creditPeer) send(id uint32, n int, start uint64, off int) {
	p.t.Helper()
	size := min(4096, n-off)
	pk := wire.Packet{Header: wire.Header{Type: wire.TypeData, SrcConn: 0x77, DstConn: uint64(p.id)}}
	pk.Data = wire.Data{PSN: p.psn, AckFloor: 100, MsgID: id, MsgLen: uint32(n), Offset: uint32(off),
		PayloadLen: uint16(size), StreamStart: start}
	pk.Payload = make([]byte, size)
	k, err := pk.Encode(p.buf)
	if err != nil {
		p.t.Fatal(err)
	}
	p.psn++
	p.now += 1000
	p.rcv.HandlePacket(p.now, p.buf[:k], RxMeta{From: p.from})
	out := make([]byte, 2048)
	for _, ok := p.rcv.PollTransmit(p.now, out); ok; _, ok = p.rcv.PollTransmit(p.now, out) {
	}
}

// whole reports whether rcv holds open message id in one buffer.
func (p *creditPeer) whole(id uint32) bool {
	for _, c := range p.rcv.list {
		if r := c.rx.get(id); r != nil {
			return r.buf != nil
		}
	}
	p.t.Fatalf("message %d not open", id)
	return false
}

// TestWholeCreditBounded: a proven peer that delivered D bytes in complete messages may
// have its next message taken whole at its first packet if what is still to come is at
// most wholeMax + min(D, wholeCreditMax) (at the limit: whole; one byte beyond: chunked),
// which spends the credit (a third message of wholeMax + 1 bytes is chunked). A peer that
// then never finishes its messages holds at most what it sent of them plus a granule each
// plus its credit, all charged (the ledger), within RecvBudget/wholeShare (a budget whose
// quarter the message exceeds chunks it whatever the credit), and gives it all back when
// its connection expires.
func TestWholeCreditBounded(t *testing.T) {
	for _, tc := range []struct {
		delivered int   // bytes of the complete message that earns the credit
		budget    int64 // RecvBudget
		credit    int   // the credit it earns
		whole     bool  // a message of wholeMax + credit is taken whole
	}{
		{512 << 10, 2 << 30, 512 << 10, true},
		{5 << 20, 2 << 30, wholeCreditMax, true},
		{5 << 20, 16 << 20, wholeCreditMax, false}, // its quarter holds no 4.25 MiB buffer
	} {
		cfg := DefaultConfig()
		cfg.MaxMessage, cfg.RecvBudget = 8<<20, tc.budget
		pool := &countPool{}
		p := newCreditPeer(t, cfg, pool)
		start := uint64(0)
		for off := 0; off < tc.delivered; off += 4096 {
			p.send(0, tc.delivered, start, off)
		}
		if st := p.rcv.Stats(); st.MsgsDelivered != 1 || st.RecvBuffered != 0 {
			t.Fatalf("%+v: delivered %d messages, RecvBuffered %d", tc, st.MsgsDelivered, st.RecvBuffered)
		}
		start += streamLen(tc.delivered)
		if c := p.rcv.list[0]; c.wholeCredit != uint64(tc.credit) {
			t.Fatalf("%+v: credit %d, want %d", tc, c.wholeCredit, tc.credit)
		}
		// Three messages, never finished: one byte beyond the credit, at it, and more.
		sizes := []int{wholeMax + tc.credit + 1, wholeMax + tc.credit, wholeMax + 1}
		wants := []bool{false, tc.whole, !tc.whole && cfg.RecvBudget/wholeShare >= wholeMax+1+int64(msgRecBytes)}
		sent, bound := uint64(0), uint64(0)
		for i, n := range sizes {
			id := uint32(i + 1)
			gets := pool.gets
			p.send(id, n, start, 0)
			start += streamLen(n)
			sent += 4096
			if got := p.whole(id); got != wants[i] || (pool.gets > gets) != got {
				t.Errorf("%+v: %d-byte message whole at its first packet: %v (buffers taken %d), want %v",
					tc, n, got, pool.gets-gets, wants[i])
			}
			bound += wholeMax + 2*RecvChunk + msgRecBytes
		}
		if err := ledgerCheck(p.rcv); err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		held := p.rcv.Stats().RecvBuffered
		if lim := sent + uint64(tc.credit) + bound; held > lim {
			t.Errorf("%+v: the peer holds %d bytes after sending %d of its open messages, bound %d", tc, held, sent, lim)
		}
		if lim := uint64(tc.budget) / wholeShare; held > lim+2*RecvChunk+3*msgRecBytes {
			t.Errorf("%+v: %d bytes held, over a quarter of the budget (%d)", tc, held, lim)
		}
		// The stalled peer holds it only until its connection expires.
		for range 20 {
			p.now += 1_000_000_000
			p.rcv.HandleTimeout(p.now)
			drainEvents(p.rcv)
		}
		if st := p.rcv.Stats(); st.RecvBuffered != 0 || p.rcv.NumConns() != 0 {
			t.Errorf("%+v: after expiry RecvBuffered %d, %d connections", tc, st.RecvBuffered, p.rcv.NumConns())
		}
	}
}
