package transport

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/smartt-transport/smartt/transport/wire"
)

// forger sends hand-made DATA packets of one connection (SrcConn 7) to an endpoint.
type forger struct {
	t      *testing.T
	e      *Endpoint
	from   netip.AddrPort
	starts map[uint32]uint64 // stream start of each message (0 if unset)
}

func newForger(t *testing.T) *forger {
	e := newEndpoint(t, DefaultConfig())
	return &forger{t: t, e: e, from: netip.MustParseAddrPort("10.6.6.6:23600"), starts: map[uint32]uint64{}}
}

// data sends PSN psn carrying bytes [off, off+n) of message id (msgLen bytes), each byte fill.
func (f *forger) data(psn uint32, id uint32, msgLen, off, n int, fill byte) {
	p := wire.Packet{Header: wire.Header{Type: wire.TypeData, SrcConn: 7}}
	p.Data = wire.Data{PSN: psn, AckFloor: 100, MsgID: id, MsgLen: uint32(msgLen), PayloadLen: uint16(n), Offset: uint32(off), StreamStart: f.starts[id]}
	p.Payload = bytes.Repeat([]byte{fill}, n)
	b := make([]byte, n+wire.DataHdrLen+64)
	k, err := p.Encode(b)
	if err != nil {
		f.t.Fatal(err)
	}
	f.e.HandlePacket(1, b[:k], RxMeta{From: f.from})
}

// received returns the messages delivered so far.
func (f *forger) received() [][]byte {
	var out [][]byte
	for ev := range pending(f.e) {
		if ev.Kind == MessageReceived {
			out = append(out, ev.Data)
		}
	}
	return out
}

// TestDuplicateBytesUnderFreshPSN: the bytes of a packet arriving twice under two PSNs (a
// spurious retransmission whose original also arrives, or a forgery) count once: the
// message does not complete with a hole (it did: payload bytes were summed), the second
// copy is acknowledged and counted as a duplicate, and the message completes byte-exact
// when its last bytes arrive.
func TestDuplicateBytesUnderFreshPSN(t *testing.T) {
	for _, size := range []int{3000, 3 * RecvChunk} { // one buffer; chunked
		f := newForger(t)
		seg := size / 3
		f.data(100, 0, size, 0, seg, 0xaa)
		f.data(101, 0, size, 0, seg, 0xaa) // the same bytes, a fresh PSN
		f.data(102, 0, size, seg, seg, 0xaa)
		if got := f.received(); len(got) != 0 {
			t.Fatalf("size %d: a message missing its last %d bytes was delivered", size, seg)
		}
		if st := f.e.Stats(); st.DupData != 1 {
			t.Errorf("size %d: DupData %d, want 1", size, st.DupData)
		}
		f.data(103, 0, size, 2*seg, size-2*seg, 0xaa)
		got := f.received()
		if len(got) != 1 || !bytes.Equal(got[0], bytes.Repeat([]byte{0xaa}, size)) {
			t.Fatalf("size %d: delivered %d messages, want one of %d bytes 0xaa", size, len(got), size)
		}
	}
}

// TestPartialOverlapRefused: a packet that partly overlaps bytes already held is refused
// as a protocol violation (no honest sender re-segments), not acknowledged, and the
// message still completes exactly from honest packets.
func TestPartialOverlapRefused(t *testing.T) {
	f := newForger(t)
	f.data(100, 0, 4000, 0, 1000, 0x11)
	f.data(101, 0, 4000, 500, 1000, 0x66) // bytes 500..1500 overlap 0..1000
	st := f.e.Stats()
	if st.ProtoViolations != 1 {
		t.Fatalf("ProtoViolations %d, want 1", st.ProtoViolations)
	}
	f.data(102, 0, 4000, 1000, 3000, 0x11)
	got := f.received()
	if len(got) != 1 || !bytes.Equal(got[0], bytes.Repeat([]byte{0x11}, 4000)) {
		t.Fatalf("want one message of 4000 bytes 0x11, got %d messages", len(got))
	}
}

// TestSpanLimit: a message may hold at most maxSpans disjoint ranges; a packet needing one
// more is refused (counted beyond the window, not acknowledged), one that fills or extends
// a range is always taken, so the message still completes when the rest arrives.
func TestSpanLimit(t *testing.T) {
	f := newForger(t)
	const seg = 16
	n := seg * (2*maxSpans + 4)
	psn := uint32(100)
	for i := 0; i < 2*maxSpans+4; i += 2 { // every other segment: maxSpans+2 isolated ranges
		f.data(psn, 0, n, i*seg, seg, 0x5a)
		psn++
	}
	st := f.e.Stats()
	if st.BeyondWindow != 2 {
		t.Fatalf("BeyondWindow %d after %d isolated ranges, want 2 refused", st.BeyondWindow, maxSpans+2)
	}
	for i := 0; i < 2*maxSpans+4; i++ { // everything, again: the refused ones are taken now
		f.data(psn, 0, n, i*seg, seg, 0x5a)
		psn++
	}
	got := f.received()
	if len(got) != 1 || !bytes.Equal(got[0], bytes.Repeat([]byte{0x5a}, n)) {
		t.Fatalf("want the message complete and exact, got %d messages", len(got))
	}
}

// TestRecycledChunksShowNothingOld: chunks are recycled without clearing, so a message
// delivered after another must consist of its own bytes only, whatever order its packets
// came in and however many duplicates and overlaps were thrown at it.
func TestRecycledChunksShowNothingOld(t *testing.T) {
	f := newForger(t)
	rng := rand.New(rand.NewPCG(5, 5))
	const size, seg = 4 * RecvChunk, 1000
	psn := uint32(100)
	for id := range uint32(6) {
		fill := byte(0x10 + id)
		f.starts[id] = uint64(id) * streamLen(size)
		order := rng.Perm((size + seg - 1) / seg)
		for _, i := range order {
			off := i * seg
			n := min(seg, size-off)
			f.data(psn, id, size, off, n, fill)
			psn++
			if rng.IntN(4) == 0 { // a forged packet partly over these bytes
				f.data(psn, id, size, off+n/2, min(seg, size-off-n/2), 0xee)
				psn++
			}
			if rng.IntN(3) == 0 { // and a duplicate under a fresh PSN
				f.data(psn, id, size, off, n, fill)
				psn++
			}
		}
		got := f.received()
		if len(got) != 1 || !bytes.Equal(got[0], bytes.Repeat([]byte{fill}, size)) {
			t.Fatalf("message %d: want one message of %d bytes %#x", id, size, fill)
		}
	}
}

// TestCoverProperty checks cover/addSpan against a byte map over random packets.
func TestCoverProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for round := range 200 {
		const n = 4096
		r := &rxMsg{n: n}
		have := make([]bool, n)
		for range 300 {
			off := rng.IntN(n)
			k := 1 + rng.IntN(min(64, n-off))
			held := 0
			for _, h := range have[off : off+k] {
				if h {
					held++
				}
			}
			at, kind := r.cover(off, k)
			switch {
			case held == k:
				if kind != coverDup {
					t.Fatalf("round %d: [%d,%d) fully held: kind %d", round, off, off+k, kind)
				}
			case held > 0:
				if kind != coverOverlap {
					t.Fatalf("round %d: [%d,%d) partly held: kind %d", round, off, off+k, kind)
				}
			default:
				if kind != coverNew && kind != coverFull {
					t.Fatalf("round %d: [%d,%d) new: kind %d", round, off, off+k, kind)
				}
				if kind == coverNew {
					r.addSpan(at, off, k)
					for i := off; i < off+k; i++ {
						have[i] = true
					}
				}
			}
			total := 0
			for i, s := range r.spans {
				if s.lo >= s.hi || (i > 0 && s.lo <= r.spans[i-1].hi) {
					t.Fatalf("round %d: spans not sorted, disjoint and merged: %v", round, r.spans)
				}
				total += int(s.hi - s.lo)
			}
			count := 0
			for _, h := range have {
				if h {
					count++
				}
			}
			if total != count || r.got != count {
				t.Fatalf("round %d: spans cover %d, got %d, map %d", round, total, r.got, count)
			}
		}
	}
}
